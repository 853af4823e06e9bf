"""The vector index (ARCHITECTURE "Storage"; DCPM 3.1 HNSW m/ef): the `VectorIndex` protocol
(`base`), the embedded qdrant-edge shard (`edge`), a Qdrant server or cluster through
qdrant-client (`server`) and pgvector in PostgreSQL (`pgvector`); `projection` turns rows into
points (row first, then vector) and repairs what a crash left unindexed; `upkeep` builds HNSW
when enough has changed. Derived data: `dcpm reindex` rebuilds it from the store."""

from __future__ import annotations

from dcpm.config import Settings
from dcpm.index.base import Hit, IndexPoint, Scope, VectorIndex

__all__ = ["Hit", "IndexPoint", "Scope", "VectorIndex", "open_index"]


def open_index(settings: Settings, dim: int, sparse_uses_idf: bool, *, embedder: str | None = None,
               replace: bool = False) -> VectorIndex:
    """The backend `Settings.vector_backend` names: the embedded shard in the data directory
    (one process), or an index every daemon shares (a Qdrant server, pgvector). One built for
    another embedder (`embedder`: its weights fingerprint) is refused, or dropped if `replace`
    (`dcpm reindex`, which then rebuilds it from the relational store: dcpm.index.identity). Whichever it
    is carries items' anticipations beside their points (dcpm.index.anticipation)."""
    from dcpm.index.anticipation import AnticipatingIndex

    return AnticipatingIndex(_backend(settings, dim, sparse_uses_idf, embedder=embedder, replace=replace))


def _backend(settings: Settings, dim: int, sparse_uses_idf: bool, *, embedder: str | None,
             replace: bool) -> VectorIndex:
    backend = settings.vector_backend
    if backend == "pgvector":
        from dcpm.index.pgvector import PgVectorIndex

        return PgVectorIndex(settings, dim, sparse_uses_idf, embedder=embedder, replace=replace)
    if backend == "qdrant":
        from dcpm.index.server import QdrantServerIndex

        return QdrantServerIndex(settings, dim, sparse_uses_idf, embedder=embedder, replace=replace)
    from dcpm.index.edge import EdgeIndex

    return EdgeIndex(settings, dim, sparse_uses_idf, embedder=embedder, replace=replace)
