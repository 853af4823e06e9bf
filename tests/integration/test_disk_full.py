"""A full disk under the data directory fails the write cleanly and loses nothing stored."""

from __future__ import annotations

import subprocess

import pytest

from dcpm.api.models import AddMemoryRequest, SearchRequest
from dcpm.domain import Turn
from dcpm.errors import StorageFull
from dcpm.service import MemoryService


@pytest.fixture
def small_disk(tmp_path):
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=600m", "tmpfs", str(mount_point)],
                            capture_output=True, text=True)
    assert result.returncode == 0, f"this test needs root to mount a small tmpfs: {result.stderr}"
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill(disk) -> None:
    """Write a filler file until the disk refuses more."""
    handle = open(disk / "filler", "wb", buffering=0)
    for chunk in (1 << 20, 4096, 1):
        try:
            while True:
                handle.write(b"\0" * chunk)
        except OSError:
            pass
    handle.close()


def test_disk_full_fails_the_write_and_keeps_what_was_stored(small_disk, settings, embedder):
    settings.data_dir = small_disk / "data"
    service = MemoryService(settings, embedder=embedder)
    try:
        stored = service.add_memory(AddMemoryRequest(user_id="ana", text="Ana's passport expires in June", infer=False))
        fill(small_disk)
        with pytest.raises(StorageFull, match="nothing was written"):
            service.add_memory(AddMemoryRequest(user_id="ana", text="Ana lost her wallet", infer=False))
        with pytest.raises(StorageFull, match="nothing was written"):
            service.import_turns("ana", [Turn(text="Ana's new PIN is not something to store")])
        hits = service.search(SearchRequest(user_id="ana", query="when does the passport expire")).hits
        assert hits[0].id == stored.raw_ids[0]
        (small_disk / "filler").unlink()
        again = service.add_memory(AddMemoryRequest(user_id="ana", text="Ana renewed her passport", infer=False))
        assert again.status == "stored"
    finally:
        service.close()
    reopened = MemoryService(settings, embedder=embedder)  # restart: every stored row has its vector
    try:
        total = reopened.list_memories("ana", kind="raw").total
        assert reopened.index.count("ana") == total
        assert reopened.get(stored.raw_ids[0]).text == "Ana's passport expires in June"
    finally:
        reopened.close()
