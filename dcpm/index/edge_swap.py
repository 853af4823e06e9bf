"""Putting a rebuilt qdrant-edge shard in place of the old one so that a crash at any moment
leaves one whole shard (dcpm.index.edge compacts this way)."""

from __future__ import annotations

import shutil
from pathlib import Path


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
