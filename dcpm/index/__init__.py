"""The vector index (ARCHITECTURE "Storage"; DCPM 3.1 HNSW m/ef): the `VectorIndex` protocol
(`base`), the embedded qdrant-edge shard (`edge`) and a Qdrant server through qdrant-client
(`server`); `projection` turns rows into points (row first, then vector) and repairs what a
crash left unindexed; `upkeep` builds HNSW when enough has changed. Derived data: `dcpm
reindex` rebuilds it from the store."""

from __future__ import annotations

from dcpm.config import Settings
from dcpm.index.base import Hit, IndexPoint, Scope, VectorIndex

__all__ = ["Hit", "IndexPoint", "Scope", "VectorIndex", "open_index"]


def open_index(settings: Settings, dim: int, sparse_uses_idf: bool) -> VectorIndex:
    """Embedded qdrant-edge shard in the data directory, or a Qdrant server when a URL is set."""
    if settings.qdrant_url:
        from dcpm.index.server import QdrantServerIndex

        return QdrantServerIndex(settings, dim, sparse_uses_idf)
    from dcpm.index.edge import EdgeIndex

    return EdgeIndex(settings, dim, sparse_uses_idf)
