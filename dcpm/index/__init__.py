"""Vector index backends behind one interface (derived data: `dcpm reindex` rebuilds it)."""

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
