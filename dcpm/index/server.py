"""Server backend: a Qdrant server or cluster through qdrant-client.

`DCPM_QDRANT_URL` takes a server URL (and `DCPM_QDRANT_API_KEY`); `:memory:` or `local:PATH`
use qdrant-client's local mode, which is fine for small tests only (slow filtered queries at
scale, and it ignores the HNSW, on-disk, quantization, shard and replication parameters). A
server keeps deleted points on disk until its own optimizers vacuum them; `compact` cannot
force that.

Collection layout for many users (Qdrant's payload-partitioned multitenancy): one collection,
`user_id` a tenant index (`is_tenant`: a user's points are stored together), and no global
HNSW graph (`m = 0`) but one per user (`payload_m`), since every query filters on one user;
vectors on disk and an int8 scalar-quantized copy in RAM when the settings ask for them; shards
and replicas spread over a cluster's nodes.
"""

from __future__ import annotations

import threading
from typing import Any, Iterator, Sequence

import numpy as np
from qdrant_client import QdrantClient
from qdrant_client import models as qm

from dcpm.config import Settings
from dcpm.embedding.base import SparseVector
from dcpm.errors import Invalid
from dcpm.index import user_idf
from dcpm.index.base import (
    DENSE,
    SPARSE,
    Condition,
    Equals,
    Hit,
    IndexPoint,
    NotEquals,
    OneOf,
    PendingPurge,
    Scalar,
    Scope,
    needs_acorn,
    scope_conditions,
)
from dcpm.index.identity import IndexIdentity


def _client(settings: Settings) -> Any:
    url = settings.qdrant_url
    if not url:
        raise Invalid("index_backend is qdrant but no server is named: set DCPM_QDRANT_URL")
    if url == ":memory:":
        return _OneCallAtATime(QdrantClient(location=":memory:"))
    if url.startswith("local:"):
        return _OneCallAtATime(QdrantClient(path=url.removeprefix("local:")))
    return QdrantClient(url=url, api_key=settings.qdrant_api_key.get_secret_value() or None)


class _OneCallAtATime:
    """qdrant-client's local mode keeps points in arrays it grows in place, with no lock: a query
    racing an upsert from another thread (two requests of a daemon) can fail with an IndexError.
    A server serializes for itself; the local client gets its calls one at a time."""

    def __init__(self, client: QdrantClient):
        self._client, self._lock = client, threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute):
            return attribute

        def serialized(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attribute(*args, **kwargs)
        return serialized


TENANT_INDEX = qm.KeywordIndexParams(type=qm.KeywordIndexType.KEYWORD, is_tenant=True)


def collection_layout(s: Settings, dim: int, idf_modifier: bool) -> dict[str, Any]:
    """The parameters of a new collection (see the module docstring): DCPM 3.1 m / ef_construct
    for the per-user graphs only, storage and placement from the settings."""
    on_disk = s.qdrant_on_disk or None
    quantization = (qm.ScalarQuantization(scalar=qm.ScalarQuantizationConfig(type=qm.ScalarType.INT8, always_ram=True))
                    if s.qdrant_quantization == "int8" else None)
    return {
        "vectors_config": {DENSE: qm.VectorParams(size=dim, distance=qm.Distance.COSINE, on_disk=on_disk)},
        "sparse_vectors_config": {SPARSE: qm.SparseVectorParams(index=qm.SparseIndexParams(on_disk=on_disk),
                                                                modifier=qm.Modifier.IDF if idf_modifier else None)},
        "hnsw_config": qm.HnswConfigDiff(m=0, payload_m=s.hnsw_m, ef_construct=s.hnsw_ef_construct, on_disk=on_disk),
        "quantization_config": quantization,
        "on_disk_payload": on_disk,
        "shard_number": s.qdrant_shards,
        "replication_factor": s.qdrant_replication_factor,
    }


class QdrantServerIndex:
    backend = "qdrant-server"

    def __init__(self, settings: Settings, dim: int, sparse_uses_idf: bool, *, embedder: str | None = None,
                 replace: bool = False):
        self.identity = IndexIdentity(dim, sparse_uses_idf, embedder)
        self.settings = settings
        self.collection = settings.qdrant_collection
        self.dim = dim
        self.sparse_uses_idf = sparse_uses_idf
        self.idf_per_user = user_idf.per_user(None, sparse_uses_idf)  # _check_identity: an older one may not
        self._frequencies = user_idf.Frequencies(self.count, self._holding, self._terms_of)
        self._client = _client(settings)
        try:
            if not self._client.collection_exists(self.collection):
                self._create()
            self._check_identity(replace)
        except BaseException:  # a refused index lets go of its client (local mode locks the folder)
            self._client.close()
            raise

    def _check_identity(self, replace: bool) -> None:
        """dcpm.index.identity, from the collection's vector parameters and its metadata."""
        config = self._client.get_collection(self.collection).config
        dense = config.params.vectors.get(DENSE) if isinstance(config.params.vectors, dict) else None
        sparse = (config.params.sparse_vectors or {}).get(SPARSE)
        metadata = config.metadata or {}
        found = {"dim": dense.size if dense else None, "embedder": metadata.get("embedder"),
                 user_idf.RECORD_KEY: metadata.get(user_idf.RECORD_KEY),
                 "sparse_idf": sparse is not None and (sparse.modifier == qm.Modifier.IDF
                                                       or metadata.get(user_idf.RECORD_KEY) == user_idf.PER_USER)}
        where = f"the Qdrant collection {self.collection}"
        action = self.identity.settle(where, found, replace)
        self.idf_per_user = user_idf.per_user(None if action == "replace" else found, self.sparse_uses_idf, where)
        if action == "replace":
            self._client.delete_collection(self.collection)
            self._create()
        elif action == "record":
            self._client.update_collection(self.collection, metadata={"embedder": self.identity.embedder})

    def _create(self) -> None:
        try:
            layout = collection_layout(self.settings, self.dim, self.sparse_uses_idf and not self.idf_per_user)
            recorded = user_idf.record({"embedder": self.identity.embedder} if self.identity.embedder else {},
                                       self.idf_per_user)
            self._client.create_collection(self.collection, **layout, metadata=recorded or None)
        except Exception:  # a daemon starting at the same moment created it first
            if not self._client.collection_exists(self.collection):
                raise
            return
        self._client.create_payload_index(self.collection, "user_id", TENANT_INDEX)
        for field in ("kind", "session_id"):
            self._client.create_payload_index(self.collection, field, qm.PayloadSchemaType.KEYWORD)
        for field in ("valid_from", "valid_to"):
            self._client.create_payload_index(self.collection, field, qm.PayloadSchemaType.FLOAT)
        if self.idf_per_user:
            self._client.create_payload_index(self.collection, user_idf.TERMS, qm.PayloadSchemaType.INTEGER)

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        if not points:
            return
        owned = [(p.payload.get("user_id", ""), p.sparse.indices) for p in points]
        with self._frequencies.writing([p.id for p in points], owned):
            self._client.upsert(self.collection, points=[
                qm.PointStruct(id=p.id, vector={DENSE: p.dense.tolist(), SPARSE: qm.SparseVector(
                    indices=p.sparse.indices, values=p.sparse.values)},
                               payload=user_idf.with_terms(p.payload, p.sparse) if self.idf_per_user else p.payload)
                for p in points
            ], wait=True)

    def delete(self, ids: Sequence[str]) -> None:
        if ids:
            with self._frequencies.writing(ids, []):
                self._client.delete(self.collection, points_selector=qm.PointIdsList(points=list(ids)), wait=True)

    def _terms_of(self, ids: Sequence[str]) -> list[user_idf.Owned]:
        records = self._client.retrieve(self.collection, ids=list(ids), with_vectors=False,
                                        with_payload=["user_id", user_idf.TERMS])
        return [((r.payload or {}).get("user_id", ""), (r.payload or {}).get(user_idf.TERMS, ())) for r in records]

    def set_payload(self, ids: Sequence[str], payload: dict[str, Any]) -> None:
        if ids:
            self._client.set_payload(self.collection, payload=payload, points=list(ids), wait=True)

    def query(self, using: str, vector: np.ndarray | SparseVector, scope: Scope, limit: int) -> list[Hit]:
        if isinstance(vector, SparseVector):
            if not vector.indices:
                return []
            if self.idf_per_user:
                vector = self._frequencies.weighted(vector, scope.user_id)
            query: Any = qm.SparseVector(indices=vector.indices, values=vector.values)
        else:
            query = vector.tolist()
        acorn = qm.AcornSearchParams(enable=self.settings.acorn and needs_acorn(scope))
        response = self._client.query_points(
            self.collection, query=query, using=using, query_filter=_filter(scope), limit=limit, with_payload=False,
            search_params=qm.SearchParams(hnsw_ef=self.settings.hnsw_ef, acorn=acorn),
        )
        return [Hit(str(p.id), float(p.score)) for p in response.points]

    def dense_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        if not ids:
            return {}
        records = self._client.retrieve(self.collection, ids=list(ids), with_vectors=[DENSE])
        return {str(r.id): np.asarray(r.vector[DENSE], dtype=np.float32) for r in records}  # type: ignore[index]

    def dense_scores(self, vector: np.ndarray, ids: Sequence[str]) -> dict[str, float]:
        if not ids:
            return {}
        response = self._client.query_points(
            self.collection, query=vector.tolist(), using=DENSE, limit=len(ids), with_payload=False,
            query_filter=qm.Filter(must=[qm.HasIdCondition(has_id=list(ids))]),
            search_params=qm.SearchParams(exact=True))
        return {str(p.id): float(p.score) for p in response.points}

    def existing(self, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        return {str(r.id) for r in self._client.retrieve(self.collection, ids=list(ids), with_vectors=False,
                                                          with_payload=False)}

    def ids(self) -> Iterator[str]:
        offset = None
        while True:
            points, offset = self._client.scroll(self.collection, limit=1024, offset=offset, with_payload=False,
                                                 with_vectors=False)
            yield from (str(p.id) for p in points)
            if offset is None:
                return

    def count(self, user_id: str | None = None) -> int:
        flt = qm.Filter(must=[_match("user_id", user_id)]) if user_id else None
        return int(self._client.count(self.collection, count_filter=flt, exact=True).count)

    def _holding(self, user_id: str, term: int) -> int:
        flt = qm.Filter(must=[_match("user_id", user_id), _match(user_idf.TERMS, term)])
        return int(self._client.count(self.collection, count_filter=flt, exact=True).count)

    def optimize(self) -> bool:
        return False  # the server runs its own optimizers

    def clear(self) -> None:
        self._client.delete_collection(self.collection)
        self.idf_per_user = user_idf.per_user(None, self.sparse_uses_idf)  # a new collection counts it per user
        self._frequencies.forget()
        self._create()

    def compact(self) -> bool:
        return False  # the server vacuums deleted points by its own optimizer thresholds

    def pending_purge(self) -> PendingPurge | None:
        return None

    def close(self) -> None:
        self._client.close()


def _match(key: str, value: Scalar) -> qm.FieldCondition:
    return qm.FieldCondition(key=key, match=qm.MatchValue(value=value))


def _filter(scope: Scope) -> qm.Filter:
    """Every condition must hold; a NotEquals is a `must_not` match, so a point without the key passes."""
    conditions = scope_conditions(scope)
    return qm.Filter(must=[_condition(c) for c in conditions if not isinstance(c, NotEquals)],
                     must_not=[_condition(c) for c in conditions if isinstance(c, NotEquals)] or None)


def _condition(condition: Condition) -> qm.FieldCondition:
    """The positive match of a condition (a NotEquals matches the value that it excludes)."""
    if isinstance(condition, (Equals, NotEquals)):
        return _match(condition.key, condition.value)
    if isinstance(condition, OneOf):
        return qm.FieldCondition(key=condition.key, match=qm.MatchAny(any=list(condition.values)))
    return qm.FieldCondition(key=condition.key, range=qm.Range(**{condition.op: condition.value}))
