"""Findings 6 and 15: the vector shard forgets deleted points (compaction, on request and on its
own after deletes), and searches keep answering while the shard is rebuilt or compacted."""

from __future__ import annotations

import threading
import time

from dcpm.api.models import SearchRequest
from dcpm.domain import Turn
from dcpm.index.projection import raw_index_text
from dcpm.service import MemoryService

from .scenarios import ANA_TURNS, BOB_TURNS
from .test_canary_delete import only_in, shard_residue

SECRET = "My locker code is quokka-4711 and the spare key is under the zebu statue"


def with_a_secret(service) -> str:
    service.import_turns("ana", list(ANA_TURNS))
    service.import_turns("bob", list(BOB_TURNS))
    service.import_turns("ana", [Turn(text=SECRET)])
    return next(m.id for m in service.list_memories("ana", kind="raw").items if m.text == SECRET)


def top_ids(service, user: str, query: str) -> list[str]:
    return [h.id for h in service.search(SearchRequest(user_id=user, query=query, limit=3)).hits]


def test_compaction_leaves_no_bytes_of_deleted_points_in_the_shard(service, settings, embedder):
    secret_id = with_a_secret(service)
    service.index.optimize()
    service.delete_memory(secret_id)
    before = {q: top_ids(service, u, q) for u, q in (("ana", "greyhound"), ("bob", "triathlon"))}
    tokens = only_in(embedder, [SECRET], [raw_index_text(t) for t in ANA_TURNS + BOB_TURNS])
    assert shard_residue(settings.data_dir, [secret_id], tokens, ["quokka"]) != {}  # what the review found
    assert service.index.compact() is True
    assert shard_residue(settings.data_dir, [secret_id], tokens, ["quokka"]) == {}
    assert {q: top_ids(service, u, q) for u, q in (("ana", "greyhound"), ("bob", "triathlon"))} == before
    assert service.index.count() == len(ANA_TURNS) + len(BOB_TURNS) and service.index.compact() is False


def test_index_upkeep_compacts_on_its_own_once_writes_are_quiet(settings, embedder):
    settings.compact_after_delete_seconds = 0.3
    service = MemoryService(settings, embedder=embedder)
    try:
        secret_id = with_a_secret(service)
        service.maintenance.start(poll_seconds=0.05)
        service.delete_memory(secret_id)
        deadline = time.monotonic() + 30
        while service.index.pending_purge() is not None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert shard_residue(settings.data_dir, [secret_id], (), ["quokka"]) == {}
        assert top_ids(service, "ana", "greyhound")
    finally:
        service.close()


def test_a_process_that_ends_leaves_no_deleted_points_behind(settings, embedder):
    service = MemoryService(settings, embedder=embedder)
    secret_id = with_a_secret(service)
    service.delete_memory(secret_id)
    service.close()  # a CLI delete runs no upkeep loop
    assert shard_residue(settings.data_dir, [secret_id], (), ["quokka"]) == {}
    reopened = MemoryService(settings, embedder=embedder)
    try:
        assert reopened.index.count() == len(ANA_TURNS) + len(BOB_TURNS)
    finally:
        reopened.close()


def test_searches_never_fail_while_the_index_is_rebuilt_or_compacted(service):
    service.import_turns("ana", list(ANA_TURNS))
    failures: list[BaseException] = []
    stop = threading.Event()

    def keep_searching() -> None:
        while not stop.is_set():
            try:
                service.search(SearchRequest(user_id="ana", query="half marathon training"))
            except BaseException as exc:  # noqa: BLE001 - every failure is the finding
                failures.append(exc)

    searcher = threading.Thread(target=keep_searching)
    searcher.start()
    try:
        for round_ in range(3):
            service.reindex()
            service.import_turns("ana", [Turn(text=f"round {round_} of the rebuild")])
            service.delete_memory(service.list_memories("ana", kind="raw").items[-1].id)
            service.index.compact()
    finally:
        stop.set()
        searcher.join(30)
    assert failures == []
