"""Putting a rebuilt qdrant-edge shard in place of the old one so that a crash at any moment
leaves one whole shard, and only when the copy fits on the disk (dcpm.index.edge compacts this way)."""

from __future__ import annotations

import shutil
from pathlib import Path

from dcpm.errors import StorageFull


def sibling(path: Path, role: str) -> Path:
    """A directory beside the shard's: `vectors.compacted` (being built), `vectors.old` (moved away)."""
    return path.with_name(f"{path.name}.{role}")


def finish_swap(path: Path) -> None:
    """After a crash inside a swap: a complete new shard waiting to replace a moved-away old one
    is put in place; leftovers of either are removed."""
    fresh, old = sibling(path, "compacted"), sibling(path, "old")
    if not path.exists() and fresh.exists() and old.exists():
        fresh.rename(path)
    shutil.rmtree(fresh, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)


def remove_shard(path: Path) -> None:
    """Remove the shard at `path` so that a crash at any moment leaves the whole shard or none
    (the next open then creates an empty one, which start-up repair fills from the store): it
    is moved aside in one rename, then removed file by file where no open looks (`finish_swap`
    removes what a crash left there). Removed in place, a kill part-way left a shard that no
    start could load, `dcpm reindex` included."""
    old = sibling(path, "old")
    shutil.rmtree(old, ignore_errors=True)
    if path.exists():
        path.rename(old)
    shutil.rmtree(old, ignore_errors=True)


def room_for_a_copy(path: Path, reserve_mb: int) -> None:
    """StorageFull unless a whole copy of the shard at `path` fits above the disk reserve: the copy
    is written through memory-mapped files, where a full disk kills the process rather than failing."""
    size = sum(f.stat().st_blocks * 512 for f in path.rglob("*") if f.is_file())  # allocated: the files are sparse
    needed_mb = size / (1 << 20) + reserve_mb
    if shutil.disk_usage(path).free / (1 << 20) < needed_mb:
        raise StorageFull(f"the vector shard was not compacted: that needs {needed_mb:.0f} MB free under "
                          f"{path.parent}. What was deleted is gone from the store and from search; its bytes "
                          "leave the shard at the first compaction once there is room")
