"""The pgvector index keeps each user's number of points (BM25's N) in a table the writes
maintain, so that a lexical query reads one row instead of counting: the counts must equal a
recount after inserts, re-upserts, deletes, a hard delete through the service, a backfill, and
two writers (two processes' indexes) writing the same users and points at once."""

from __future__ import annotations

import math
import random
import threading

import numpy as np
import psycopg
import pytest

from dcpm.config import Settings
from dcpm.domain import Turn
from dcpm.embedding.base import SparseVector
from dcpm.errors import Invalid
from dcpm.index.base import SPARSE, IndexPoint, Scope
from dcpm.index.pgvector import PgVectorIndex

DIM = 8


def point(point_id: str, user: str, terms: dict[int, float], seed: int = 0) -> IndexPoint:
    dense = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
    return IndexPoint(point_id, dense / np.linalg.norm(dense),
                      SparseVector(indices=list(terms), values=list(terms.values())), {"user_id": user, "kind": "raw"})


@pytest.fixture
def open_index(postgres_url, tmp_path):
    """Opens indexes on one fresh database, as separate processes would (each its own pool)."""
    opened: list[PgVectorIndex] = []

    def make() -> PgVectorIndex:
        settings = Settings(data_dir=tmp_path / f"data{len(opened)}", index_backend="pgvector",
                            pgvector_url=postgres_url)
        opened.append(PgVectorIndex(settings, DIM, sparse_uses_idf=True))
        return opened[-1]

    yield make
    for index in opened:
        index.close()


def counts(index: PgVectorIndex) -> tuple[dict[str, int], dict[str, int]]:
    """(the kept counts, a recount of the points)."""
    with psycopg.connect(index.url) as conn:
        kept = dict(conn.execute(f"SELECT user_id, points FROM {index.t.users_name}").fetchall())
        recount = dict(conn.execute(f"SELECT user_id, count(*) FROM {index.t.name} GROUP BY user_id").fetchall())
    return kept, recount


def test_counts_follow_inserts_reupserts_and_deletes(open_index):
    index = open_index()
    index.upsert([point(f"a{i}", "ana", {1: 1.0, 2: 0.5}, i) for i in range(5)] + [point("b0", "bob", {1: 1.0})])
    index.upsert([point("a0", "ana", {3: 1.0}), point("a5", "ana", {3: 1.0})])  # one re-upserted, one new
    kept, recount = counts(index)
    assert kept == recount == {"ana": 6, "bob": 1}
    index.delete(["a1", "a2", "b0", "nobody"])
    kept, recount = counts(index)
    assert kept == recount == {"ana": 4}  # Bob's last point took his row with it
    index.delete(["a1"])  # already gone: nothing changes
    assert counts(index)[0] == {"ana": 4}
    index.clear()
    assert counts(index) == ({}, {})


def test_a_point_cannot_move_to_another_user(open_index):
    index = open_index()
    index.upsert([point("p", "ana", {1: 1.0})])
    with pytest.raises(Invalid):
        index.upsert([point("p", "bob", {1: 1.0})])
    with pytest.raises(Invalid):
        index.set_payload(["p"], {"user_id": "bob"})
    assert counts(index)[0] == {"ana": 1} and index.count("bob") == 0


def test_idf_after_deletes_uses_the_users_remaining_points(open_index):
    """BM25 score = query weight x stored weight x ln((N - n + 0.5) / (n + 0.5) + 1) over the
    user's own points: after deletes N and n are those of the points that are left."""
    index = open_index()
    index.upsert([point(f"a{i}", "ana", {7: 1.0} if i < 2 else {8: 1.0}, i) for i in range(6)])
    index.upsert([point(f"b{i}", "bob", {7: 1.0}, i) for i in range(4)])  # Bob's points weigh nothing on Ana's
    index.delete(["a0", "a3", "a4"])
    hits = index.query(SPARSE, SparseVector(indices=[7], values=[2.0]), Scope(user_id="ana"), 10)
    n_points, holding = 3, 1  # a1, a2, a5 are left; only a1 holds term 7
    assert [h.id for h in hits] == ["a1"]
    assert hits[0].score == pytest.approx(2.0 * math.log((n_points - holding + 0.5) / (holding + 0.5) + 1), rel=1e-5)


def test_an_index_from_before_the_counts_is_counted_once_at_open(open_index):
    index = open_index()
    index.upsert([point(f"a{i}", "ana", {1: 1.0}, i) for i in range(3)] + [point("b", "bob", {1: 1.0})])
    with psycopg.connect(index.url) as conn:
        conn.execute(f"DROP TABLE {index.t.users_name}")
    reopened = open_index()
    kept, recount = counts(reopened)
    assert kept == recount == {"ana": 3, "bob": 1}


def test_two_writers_at_once_leave_exact_counts(open_index):
    """Two indexes (two daemons' pools) upsert overlapping batches of the same users and points
    and delete overlapping ids, from two threads started together: a point both insert is
    counted once, a point both delete is subtracted once, and batches over several users lock
    their counts in one order (no deadlock). Deletes and payload updates lock their rows in id
    order as upserts do: before that, 5 of 12 runs of this test deadlocked."""
    first, second = open_index(), open_index()
    users = ["ana", "bob", "cai", "dee"]
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def write(index: PgVectorIndex, seed: int) -> None:
        rng = random.Random(seed)
        try:
            start.wait()
            for _ in range(120):
                ids = rng.sample(range(60), 12)
                index.upsert([point(f"{users[i % 4]}-{i}", users[i % 4], {i % 5: 1.0}, i) for i in ids])
                index.set_payload([f"{users[i % 4]}-{i}" for i in rng.sample(range(60), 8)], {"seen": True})
                index.delete([f"{users[i % 4]}-{i}" for i in rng.sample(range(60), 5)])
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(index, seed)) for seed, index in enumerate((first, second))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    kept, recount = counts(first)
    assert kept == recount and sum(kept.values()) == first.count() > 0


def test_a_hard_delete_through_the_service_keeps_the_counts_exact(postgres_url, tmp_path, embedder):
    from dcpm.service import MemoryService

    settings = Settings(data_dir=tmp_path / "data", database_url=postgres_url, index_backend="pgvector")
    svc = MemoryService(settings, embedder=embedder)
    try:
        svc.import_turns("ana", [Turn(text="I repotted the fig tree on the balcony", speaker="Ana"),
                                 Turn(text="The fig finally has three new leaves", speaker="Ana"),
                                 Turn(text="My brother visits from Porto in June", speaker="Ana")])
        svc.import_turns("bob", [Turn(text="Band practice moved to Thursdays", speaker="Bob")])
        fig = next(m.id for m in svc.list_memories("ana", kind="raw").items if "repotted" in m.text)
        svc.delete_memory(fig)
        kept, recount = counts(svc.index)
        assert kept == recount == {"ana": 2, "bob": 1}
        svc.delete_user("ana")
        kept, recount = counts(svc.index)
        assert kept == recount == {"bob": 1}
    finally:
        svc.close()
