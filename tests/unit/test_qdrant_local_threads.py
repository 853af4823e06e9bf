"""qdrant-client's local mode (the shared index of the PostgreSQL tests, `DCPM_QDRANT_URL=:memory:`)
has no lock of its own; a daemon queries and upserts from several request threads at once. The
index serializes its calls, so no thread sees a half-grown array (an IndexError in CI before)."""

from __future__ import annotations

import threading
import uuid

import numpy as np

from dcpm.config import Settings
from dcpm.embedding.base import SparseVector
from dcpm.index.base import DENSE, SPARSE, IndexPoint, Scope
from dcpm.index.server import QdrantServerIndex

DIM = 16


def points(rng: np.random.Generator, n: int) -> list[IndexPoint]:
    vectors = rng.normal(size=(n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return [IndexPoint(id=str(uuid.uuid4()), dense=v, sparse=SparseVector([int(rng.integers(1, 50))], [1.0]),
                       payload={"user_id": "ana", "kind": "raw", "valid_from": 0.0}) for v in vectors]


def test_writers_and_readers_in_threads_all_succeed(tmp_path):
    index = QdrantServerIndex(Settings(data_dir=tmp_path, qdrant_url=":memory:"), DIM, sparse_uses_idf=True)
    errors: list[BaseException] = []
    written = 8 * 25 * 4

    def write(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            for _ in range(25):
                index.upsert(points(rng, 4))
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion below
            errors.append(exc)

    def read(seed: int) -> None:
        rng = np.random.default_rng(100 + seed)
        try:
            for _ in range(60):
                index.query(DENSE, points(rng, 1)[0].dense, Scope(user_id="ana"), 10)
                index.query(SPARSE, SparseVector([int(rng.integers(1, 50))], [1.0]), Scope(user_id="ana"), 10)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    threads += [threading.Thread(target=read, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert index.count("ana") == written
    index.close()
