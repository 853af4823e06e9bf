"""Embedded backend: a qdrant-edge shard on disk in the data directory.

qdrant-edge builds HNSW only when `optimize()` is called; the daemon's maintenance loop calls
it after enough writes or when idle (see `dcpm.index.upkeep`).

A deleted point stays in the shard's write-ahead log, segments and payload index (qdrant-edge 0.9
offers no purge: its vacuum skips segments of fewer than 1000 vectors, and the WAL keeps old entries
after flush and optimize), so `compact` rebuilds the shard from the surviving points in a sibling
directory and swaps it in. A marker file records deletes not yet compacted, so a process that dies
first leaves the work to the next one; `close` compacts what is pending.

Searches share `_gate` and never see a shard closed under them; writes are serialised by
`_write_lock`, and whoever closes or swaps the shard holds both.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from dcpm.config import Settings
from dcpm.embedding.base import SparseVector
from dcpm.errors import StorageFull, is_disk_full
from dcpm.index import user_idf
from dcpm.index.base import DENSE, SPARSE, Hit, IndexPoint, PendingPurge, Scope, SharedLock, needs_acorn
from dcpm.index.edge_filter import match, scope_filter
from dcpm.index.edge_swap import finish_swap, remove_shard, room_for_a_copy, sibling
from dcpm.index.identity import IndexIdentity, read_record

log = logging.getLogger("dcpm.index")
SHARD_DIR = "vectors"
META_FILE = "vectors.json"
PURGE_MARKER = "vectors.purge-pending"  # exists while deleted points still have bytes in the shard
COPY_BATCH = 512  # points per scroll page (compaction copies the survivors a page at a time)


class EdgeIndex:
    backend = "qdrant-edge"

    def __init__(self, settings: Settings, dim: int, sparse_uses_idf: bool, *, embedder: str | None = None,
                 replace: bool = False):
        """`replace`: an index built for another embedder is dropped, not refused (reindex only)."""
        self.identity = IndexIdentity(dim, sparse_uses_idf, embedder)
        self.path = Path(settings.data_dir) / SHARD_DIR
        self.meta_path = Path(settings.data_dir) / META_FILE
        self.dim = dim
        self.sparse_uses_idf = sparse_uses_idf
        self.settings = settings
        self.marker = Path(settings.data_dir) / PURGE_MARKER
        self.idf_per_user = user_idf.per_user(None, sparse_uses_idf)  # _check_meta: an older shard may not
        self._frequencies = user_idf.Frequencies(self.count, self._holding, self._terms_of, refresh_seconds=None)
        self._write_lock = threading.Lock()
        self._gate = SharedLock()
        finish_swap(self.path)
        self._check_meta(replace)
        self._shard = self._open()
        now = time.monotonic()
        self._pending = PendingPurge(now, now) if self.marker.exists() else None

    def _config(self) -> qe.EdgeConfig:
        s = self.settings
        return qe.EdgeConfig(
            vectors={DENSE: qe.EdgeVectorParams(size=self.dim, distance=qe.Distance.Cosine)},
            sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(
                modifier=qe.Modifier.Idf if self.sparse_uses_idf and not self.idf_per_user else None)},
            hnsw_config=qe.HnswIndexConfig(m=s.hnsw_m, ef_construct=s.hnsw_ef_construct,
                                           full_scan_threshold=s.hnsw_full_scan_threshold_kb, payload_m=s.hnsw_m),
        )

    def _check_meta(self, replace: bool) -> None:
        """dcpm.index.identity; a new shard's record is written when `_open` creates it."""
        if not (self.meta_path.exists() and self.path.exists()):
            return
        found = read_record(self.meta_path, f"the vector index in {self.path}", replace)
        action = self.identity.settle(f"the vector index in {self.path}", found, replace)
        if action != "replace":
            self.idf_per_user = user_idf.per_user(found, self.sparse_uses_idf, f"the vector index in {self.path}")
        if action == "replace":
            remove_shard(self.path)  # _open creates an empty one for this embedder
            self.marker.unlink(missing_ok=True)  # deleted points went with it
        elif action == "record":
            self._write_meta()

    def _write_meta(self) -> None:
        """Whole or not at all: a crash mid-write must not leave a file that no start can read."""
        partial = self.meta_path.with_name(self.meta_path.name + ".tmp")
        partial.write_text(json.dumps(user_idf.record(self.identity.record(), self.idf_per_user)))
        os.replace(partial, self.meta_path)

    def _open(self) -> qe.EdgeShard:
        if self.path.exists() and any(self.path.iterdir()):
            return qe.EdgeShard.load(str(self.path))
        shard = self._create(self.path)
        self._write_meta()
        return shard

    def _create(self, path: Path) -> qe.EdgeShard:
        path.mkdir(parents=True, exist_ok=True)
        shard = qe.EdgeShard.create(str(path), self._config())
        keyword, number = qe.PayloadSchemaType.Keyword, qe.PayloadSchemaType.Float
        fields = {"user_id": qe.KeywordIndexParams(is_tenant=True), "kind": keyword, "session_id": keyword,
                  "valid_from": number, "valid_to": number}
        if self.idf_per_user:
            fields[user_idf.TERMS] = qe.PayloadSchemaType.Integer
        for name, schema in fields.items():
            shard.update(qe.UpdateOperation.create_field_index(name, schema))
        return shard

    def _changed(self, deleted: bool = False) -> None:
        """Called under the write lock: note a delete for compaction, and any change for quiet."""
        now = time.monotonic()
        if deleted and self._pending is None:
            self.marker.touch()
            self._pending = PendingPurge(now, now)
        elif self._pending is not None:
            self._pending = PendingPurge(self._pending.since, now)

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        if not points:
            return
        edge_points = [
            qe.Point(p.id, {DENSE: p.dense.tolist(), SPARSE: qe.SparseVector(p.sparse.indices, p.sparse.values)},
                     user_idf.with_terms(p.payload, p.sparse) if self.idf_per_user else p.payload)
            for p in points
        ]
        owned = [(p.payload.get("user_id", ""), p.sparse.indices) for p in points]
        with self._write_lock, self._frequencies.writing([p.id for p in points], owned):
            try:
                self._shard.update(qe.UpdateOperation.upsert_points(edge_points))
            except Exception as exc:  # the binding raises plain exceptions; only disk-full is ours to name
                if is_disk_full(exc):
                    raise StorageFull("the disk under the data directory is full; vectors were not written "
                                      "(the rows are kept and indexed at the next start)") from exc
                raise
            self._changed()

    def delete(self, ids: Sequence[str]) -> None:
        if ids:
            with self._write_lock, self._frequencies.writing(ids, []):
                self._changed(deleted=True)  # before the delete: a crash in it leaves the marker
                self._shard.update(qe.UpdateOperation.delete_points(list(ids)))

    def set_payload(self, ids: Sequence[str], payload: dict[str, Any]) -> None:
        if ids:
            with self._write_lock:
                self._shard.update(qe.UpdateOperation.set_payload(list(ids), payload))
                self._changed()

    def query(self, using: str, vector: np.ndarray | SparseVector, scope: Scope, limit: int) -> list[Hit]:
        if isinstance(vector, SparseVector):
            if not vector.indices:
                return []
            if self.idf_per_user:
                vector = self._frequencies.weighted(vector, scope.user_id)
            query_vector: Any = qe.SparseVector(vector.indices, vector.values)
        else:
            query_vector = vector.tolist()
        params = qe.SearchParams(hnsw_ef=self.settings.hnsw_ef,
                                 acorn=qe.AcornSearchParams(enable=self.settings.acorn and needs_acorn(scope)))
        request = qe.QueryRequest(limit=limit, query=qe.Query.Nearest(query_vector, using=using),
                                  filter=scope_filter(scope), with_payload=False, params=params)
        with self._gate.shared():
            points = self._shard.query(request)
        return [Hit(str(p.id), float(p.score)) for p in points]

    def dense_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        if not ids:
            return {}
        with self._gate.shared():
            records = self._shard.retrieve(list(ids), with_payload=False, with_vector=[DENSE])
        return {str(r.id): np.asarray(r.vector[DENSE], dtype=np.float32) for r in records}

    def dense_scores(self, vector: np.ndarray, ids: Sequence[str]) -> dict[str, float]:
        if not ids:
            return {}
        request = qe.QueryRequest(limit=len(ids), query=qe.Query.Nearest(vector.tolist(), using=DENSE),
                                  filter=qe.Filter(must=[qe.HasIdCondition(set(ids))]), with_payload=False,
                                  params=qe.SearchParams(exact=True))
        with self._gate.shared():
            points = self._shard.query(request)
        return {str(p.id): float(p.score) for p in points}

    def existing(self, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        with self._gate.shared():
            records = self._shard.retrieve(list(ids), with_payload=False, with_vector=False)
        return {str(r.id) for r in records}

    def ids(self) -> Iterator[str]:
        return (str(r.id) for page in self._pages(with_payload=False, with_vector=False) for r in page)

    def _pages(self, **fields: bool) -> Iterator[list]:
        """The shard's points, a scroll page at a time (searches and writes go on between pages)."""
        offset, more = None, True
        while more:
            with self._gate.shared():
                records, offset = self._shard.scroll(qe.ScrollRequest(offset=offset, limit=COPY_BATCH, **fields))
            more = offset is not None
            if records:
                yield records

    def count(self, user_id: str | None = None) -> int:
        flt = qe.Filter(must=[match("user_id", user_id)]) if user_id else None
        with self._gate.shared():
            return int(self._shard.count(qe.CountRequest(filter=flt, exact=True)))

    def _terms_of(self, ids: Sequence[str]) -> list[user_idf.Owned]:
        with self._gate.shared():
            records = self._shard.retrieve(list(ids), with_payload=["user_id", user_idf.TERMS], with_vector=False)
        return [(r.payload.get("user_id", ""), r.payload.get(user_idf.TERMS, ())) for r in records]

    def _holding(self, user_id: str, term: int) -> int:
        flt = qe.Filter(must=[match("user_id", user_id), match(user_idf.TERMS, term)])
        with self._gate.shared():
            return int(self._shard.count(qe.CountRequest(filter=flt, exact=True)))

    def optimize(self) -> bool:
        with self._write_lock:
            return bool(self._shard.optimize())

    def clear(self) -> None:
        with self._write_lock, self._gate.exclusive():
            self._shard.close()
            remove_shard(self.path)
            self.meta_path.unlink(missing_ok=True)
            self.idf_per_user = user_idf.per_user(None, self.sparse_uses_idf)  # a new shard counts it per user
            self._frequencies.forget()
            self._shard = self._open()
            self.marker.unlink(missing_ok=True)  # nothing deleted is left in an empty shard
            self._pending = None

    def pending_purge(self) -> PendingPurge | None:
        return self._pending

    def compact(self) -> bool:
        """Rebuild the shard from its surviving points (vectors and payloads as stored) in a
        sibling directory, swap it in, remove the old files. Writes wait for the copy; searches
        use the old shard until the swap, which they wait out. Only when deletes are pending."""
        with self._write_lock:
            if self._pending is None:
                return False
            fresh_path, old_path = sibling(self.path, "compacted"), sibling(self.path, "old")
            shutil.rmtree(fresh_path, ignore_errors=True)
            room_for_a_copy(self.path, self.settings.min_free_disk_mb)
            try:
                self._copy_survivors(fresh_path)
            except Exception as exc:
                shutil.rmtree(fresh_path, ignore_errors=True)
                if is_disk_full(exc):
                    raise StorageFull("the disk is full: the vector shard could not be compacted, so deleted "
                                      "points keep their bytes in it until a later compaction") from exc
                raise
            with self._gate.exclusive():
                self._shard.close()
                self.path.rename(old_path)
                fresh_path.rename(self.path)
                self._shard = qe.EdgeShard.load(str(self.path))
            shutil.rmtree(old_path)
            self.marker.unlink(missing_ok=True)
            self._pending = None
            return True

    def _copy_survivors(self, path: Path) -> None:
        fresh = self._create(path)
        try:
            for records in self._pages(with_payload=True, with_vector=True):
                fresh.update(qe.UpdateOperation.upsert_points([qe.Point(r.id, r.vector, r.payload) for r in records]))
            fresh.flush()
            fresh.optimize()
        finally:
            fresh.close()

    def close(self) -> None:
        if self._pending is not None:
            try:
                self.compact()
            except Exception:  # the marker stays: the next process compacts
                log.exception("vector index not compacted on close; deleted points stay until the next start")
        with self._write_lock, self._gate.exclusive():
            try:
                self._shard.flush()
            except Exception as exc:  # the write-ahead log still holds every acknowledged update
                if not is_disk_full(exc):
                    raise
                log.warning("vector index not flushed on close (disk full); its WAL replays at next start")
            self._shard.close()

