"""Server backend: a Qdrant server or cluster through qdrant-client.

`DCPM_QDRANT_URL` takes a server URL; `:memory:` or `local:PATH` use qdrant-client's local
mode, which is fine for small tests only (slow filtered queries at scale). A server keeps
deleted points on disk until its own optimizers vacuum them; `compact` cannot force that.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from qdrant_client import QdrantClient
from qdrant_client import models as qm

from dcpm.config import Settings
from dcpm.embedding.base import SparseVector
from dcpm.index.base import (
    DENSE,
    SPARSE,
    Condition,
    Equals,
    Hit,
    IndexPoint,
    OneOf,
    PendingPurge,
    Scope,
    scope_conditions,
)


def _client(settings: Settings) -> QdrantClient:
    url = settings.qdrant_url
    if url == ":memory:":
        return QdrantClient(location=":memory:")
    if url.startswith("local:"):
        return QdrantClient(path=url.removeprefix("local:"))
    return QdrantClient(url=url, api_key=settings.qdrant_api_key.get_secret_value() or None)


class QdrantServerIndex:
    backend = "qdrant-server"

    def __init__(self, settings: Settings, dim: int, sparse_uses_idf: bool):
        self.settings = settings
        self.collection = settings.qdrant_collection
        self.dim = dim
        self.sparse_uses_idf = sparse_uses_idf
        self._client = _client(settings)
        if not self._client.collection_exists(self.collection):
            self._create()

    def _create(self) -> None:
        s = self.settings
        self._client.create_collection(
            self.collection,
            vectors_config={DENSE: qm.VectorParams(size=self.dim, distance=qm.Distance.COSINE)},
            sparse_vectors_config={SPARSE: qm.SparseVectorParams(modifier=qm.Modifier.IDF if self.sparse_uses_idf else None)},
            hnsw_config=qm.HnswConfigDiff(m=s.hnsw_m, ef_construct=s.hnsw_ef_construct, payload_m=s.hnsw_m),
        )
        self._client.create_payload_index(self.collection, "user_id",
                                          qm.KeywordIndexParams(type=qm.KeywordIndexType.KEYWORD, is_tenant=True))
        for field in ("kind", "session_id"):
            self._client.create_payload_index(self.collection, field, qm.PayloadSchemaType.KEYWORD)
        for field in ("valid_from", "valid_to"):
            self._client.create_payload_index(self.collection, field, qm.PayloadSchemaType.FLOAT)

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        if not points:
            return
        self._client.upsert(self.collection, points=[
            qm.PointStruct(id=p.id, vector={DENSE: p.dense.tolist(),
                                            SPARSE: qm.SparseVector(indices=p.sparse.indices, values=p.sparse.values)},
                           payload=p.payload)
            for p in points
        ], wait=True)

    def delete(self, ids: Sequence[str]) -> None:
        if ids:
            self._client.delete(self.collection, points_selector=qm.PointIdsList(points=list(ids)), wait=True)

    def set_payload(self, ids: Sequence[str], payload: dict[str, Any]) -> None:
        if ids:
            self._client.set_payload(self.collection, payload=payload, points=list(ids), wait=True)

    def query(self, using: str, vector: np.ndarray | SparseVector, scope: Scope, limit: int) -> list[Hit]:
        if isinstance(vector, SparseVector):
            if not vector.indices:
                return []
            query: Any = qm.SparseVector(indices=vector.indices, values=vector.values)
        else:
            query = vector.tolist()
        response = self._client.query_points(
            self.collection, query=query, using=using, query_filter=_filter(scope), limit=limit, with_payload=True,
            search_params=qm.SearchParams(hnsw_ef=self.settings.hnsw_ef,
                                          acorn=qm.AcornSearchParams(enable=self.settings.acorn)),
        )
        return [Hit(str(p.id), float(p.score), p.payload or {}) for p in response.points]

    def dense_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        if not ids:
            return {}
        records = self._client.retrieve(self.collection, ids=list(ids), with_vectors=[DENSE])
        return {str(r.id): np.asarray(r.vector[DENSE], dtype=np.float32) for r in records}  # type: ignore[index]

    def existing(self, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        return {str(r.id) for r in self._client.retrieve(self.collection, ids=list(ids), with_vectors=False,
                                                          with_payload=False)}

    def count(self, user_id: str | None = None) -> int:
        flt = qm.Filter(must=[_match("user_id", user_id)]) if user_id else None
        return int(self._client.count(self.collection, count_filter=flt, exact=True).count)

    def optimize(self) -> bool:
        return False  # the server runs its own optimizers

    def clear(self) -> None:
        self._client.delete_collection(self.collection)
        self._create()

    def compact(self) -> bool:
        return False  # the server vacuums deleted points by its own optimizer thresholds

    def pending_purge(self) -> PendingPurge | None:
        return None

    def close(self) -> None:
        self._client.close()


def _match(key: str, value: str) -> qm.FieldCondition:
    return qm.FieldCondition(key=key, match=qm.MatchValue(value=value))


def _filter(scope: Scope) -> qm.Filter:
    return qm.Filter(must=[_condition(c) for c in scope_conditions(scope)])


def _condition(condition: Condition) -> qm.FieldCondition:
    if isinstance(condition, Equals):
        return _match(condition.key, condition.value)
    if isinstance(condition, OneOf):
        return qm.FieldCondition(key=condition.key, match=qm.MatchAny(any=list(condition.values)))
    return qm.FieldCondition(key=condition.key, range=qm.Range(**{condition.op: condition.value}))
