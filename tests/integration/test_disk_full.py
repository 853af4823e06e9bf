"""A full disk under the data directory fails the write cleanly and loses nothing stored."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from dcpm.api.models import AddMemoryRequest, SearchRequest
from dcpm.domain import Turn
from dcpm.errors import StorageFull
from dcpm.service import MemoryService


@pytest.fixture
def small_disk(tmp_path):
    """A 600 MB tmpfs owned by the test's user: mounted as root, or through `sudo -n` (never a skip)."""
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    as_root = [] if os.geteuid() == 0 else ["sudo", "-n"]
    if as_root and not shutil.which("sudo"):
        pytest.fail("this test mounts a small tmpfs and needs root: run it as root (there is no sudo here)",
                    pytrace=False)
    options = f"size=600m,mode=0700,uid={os.getuid()},gid={os.getgid()}"
    result = subprocess.run([*as_root, "mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mount_point)],
                            check=False, capture_output=True, text=True)
    if result.returncode != 0:
        pytest.fail("this test mounts a small tmpfs and needs root: run it as root, or run `sudo -v` first so "
                    f"that `sudo -n mount` works ({' '.join(as_root + ['mount'])} said: {result.stderr.strip()})",
                    pytrace=False)
    yield mount_point
    subprocess.run([*as_root, "umount", "-l", str(mount_point)], check=False)


def fill(disk) -> None:
    """Write a filler file until the disk refuses more."""
    with open(disk / "filler", "wb", buffering=0) as handle:
        for chunk in (1 << 20, 4096, 1):
            try:
                while True:
                    handle.write(b"\0" * chunk)
            except OSError:
                pass


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
