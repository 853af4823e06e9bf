"""An audit filled the disk under a daemon: adds were refused cleanly (507), but a delete answered
"rolled back" after its vector was already gone, and the next one killed the daemon with SIGBUS (the
vector shard writes through memory-mapped files). Every write that reaches the shard now keeps the
disk reserve, and a delete whose commit fails gives the rows it kept their vectors back."""

from __future__ import annotations

import logging
import shutil

import pytest

from dcpm.api.models import SearchRequest
from dcpm.errors import StorageFull
from dcpm.index.edge_swap import room_for_a_copy

from .scenarios import ANA_TURNS


def raw_ids(service) -> dict[str, str]:
    return {m.text: m.id for m in service.list_memories("ana", kind="raw").items}


def found(service, query: str) -> list[str]:
    return [h.text for h in service.search(SearchRequest(user_id="ana", query=query, limit=3)).hits]


def short_of_room(settings) -> None:
    """A reserve larger than the free space: the disk is 'full' as far as dcpm is concerned."""
    settings.min_free_disk_mb = int(shutil.disk_usage(settings.data_dir).free / (1 << 20)) + 1024


def test_below_the_reserve_deletes_edits_reindex_and_consolidation_are_refused_and_nothing_changes(service,
                                                                                                  settings):
    from dcpm.api.models import ConsolidateRequest

    service.import_turns("ana", list(ANA_TURNS))
    greyhound = raw_ids(service)[ANA_TURNS[0].text]
    points = service.index.count()
    short_of_room(settings)
    for refused in (lambda: service.delete_memory(greyhound), lambda: service.delete_user("ana"),
                    lambda: service.delete_session("ana", "none"), lambda: service.reindex(),
                    lambda: service.update_memory(greyhound, "Pepper is a whippet"),
                    lambda: service.consolidate(ConsolidateRequest(user_id="ana"))):
        with pytest.raises(StorageFull, match="in reserve"):
            refused()
    assert service.index.count() == points and len(raw_ids(service)) == len(ANA_TURNS)
    assert ANA_TURNS[0].text in found(service, "greyhound")


def test_a_delete_whose_commit_fails_gives_the_kept_rows_their_vectors_back(service, monkeypatch):
    from dcpm.admin import delete as admin_delete

    service.import_turns("ana", list(ANA_TURNS))
    greyhound = raw_ids(service)[ANA_TURNS[0].text]

    def disk_fills_before_the_commit(session, user_id, raws):
        raise StorageFull("the disk under the data directory is full; the write was rolled back")

    monkeypatch.setattr(admin_delete, "_drop_raws", disk_fills_before_the_commit)
    with pytest.raises(StorageFull, match="rolled back"):
        service.delete_memory(greyhound)  # its vector went before the failed commit
    assert greyhound in raw_ids(service).values()
    assert service.index.existing([greyhound]) == {greyhound}
    assert ANA_TURNS[0].text in found(service, "greyhound")


def test_upkeep_waits_for_room_and_says_so_once(service, settings, caplog):
    service.import_turns("ana", list(ANA_TURNS))
    service.delete_memory(raw_ids(service)[ANA_TURNS[0].text])
    settings.compact_after_delete_seconds = settings.compact_max_delay_seconds = 0
    from dcpm.index.upkeep import IndexMaintenance

    short_of_room(settings)
    upkeep = IndexMaintenance(service.index, settings)
    with caplog.at_level(logging.WARNING, logger="dcpm.index"):
        for _ in range(3):
            upkeep.step()
    assert service.index.pending_purge() is not None  # not compacted into a full disk
    assert sum("waits for disk space" in r.getMessage() for r in caplog.records) == 1
    settings.min_free_disk_mb = 0
    upkeep = IndexMaintenance(service.index, settings)
    upkeep.step()
    assert service.index.pending_purge() is None


def test_compaction_needs_room_for_a_whole_copy_of_the_shard(service, settings, monkeypatch):
    from dcpm.index import edge_swap

    service.import_turns("ana", list(ANA_TURNS))
    service.delete_memory(raw_ids(service)[ANA_TURNS[0].text])
    shard = settings.data_dir / "vectors"
    allocated = sum(f.stat().st_blocks * 512 for f in shard.rglob("*") if f.is_file())
    reserve_mb = service.index.settings.min_free_disk_mb
    usage = shutil.disk_usage(shard)
    half_a_copy = usage._replace(free=reserve_mb * (1 << 20) + allocated // 2)  # above the reserve, but not a copy
    monkeypatch.setattr(edge_swap.shutil, "disk_usage", lambda path: half_a_copy)
    with pytest.raises(StorageFull, match="gone from the store and from search"):
        service.index.compact()
    assert service.index.pending_purge() is not None and len(found(service, "marathon")) > 0
    monkeypatch.setattr(edge_swap.shutil, "disk_usage", lambda path: usage)
    room_for_a_copy(shard, reserve_mb)
    assert service.index.compact() is True
