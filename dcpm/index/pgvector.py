"""pgvector backend: the vector index in PostgreSQL, shared by every daemon and worker that
uses the database (`DCPM_INDEX_BACKEND=pgvector`; tables in `dcpm.index.pgvector_sql`).

Dense search is exact for a user with few points: their rows come off the `user_id` btree and
are ranked by true cosine distance (no HNSW graph covers them, so the planner cannot use one).
A user past `pgvector_user_hnsw_rows` points gets an HNSW graph of their own (a partial index,
built by `optimize`): pgvector 0.6 filters after the graph walk, so one graph over all users
would lose most of one user's neighbours, whereas a user's own graph loses none to other
users. Should the scope's other conditions leave fewer hits than asked for, the query is run
again exactly.

The lexical channel is BM25 in SQL: the embedder's term weights per point in a table, scored
with an IDF computed over the querying user's own points (Qdrant's formula, per user rather
than per collection, so no user's vocabulary weighs on another's ranking). The user's N is one
row of a table the writes keep (each upsert and delete adds what it inserted or removed, in its
own transaction); the document frequencies are counted for the query's terms only. BM25's
length normalisation is already in the stored weights (the embedder's fixed average length), so
no total length is kept.

Deletes remove the rows at once, for every process. Their bytes stay in the table's and
indexes' pages as dead tuples until VACUUM marks that space free (`compact`, and PostgreSQL's
autovacuum), and in free space and the write-ahead log until later writes and checkpoints reuse
them; `clear` truncates, which gives the files back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from typing import Any, Iterator, Sequence

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout

from dcpm.config import Settings
from dcpm.embedding.base import SparseVector
from dcpm.errors import Invalid, Unavailable
from dcpm.index import pgvector_sql as q
from dcpm.index.base import DENSE, Hit, IndexPoint, PendingPurge, Scope, scope_conditions
from dcpm.index.identity import IndexIdentity
from dcpm.index.pgvector_upkeep import build_user_graphs, drop_user_graphs

log = logging.getLogger("dcpm.index")
POOL_SIZE = 8  # connections per process: searches from the server's thread pool, writers, upkeep
CONNECT_SECONDS = 10.0
MAX_EF_SEARCH = 1000  # pgvector's upper bound for hnsw.ef_search


class PgVectorIndex:
    backend = "pgvector"
    idf_per_user = True  # BM25's IDF counts the querying user's points (_lexical)

    def __init__(self, settings: Settings, dim: int, sparse_uses_idf: bool, *, embedder: str | None = None,
                 replace: bool = False):
        self.identity = IndexIdentity(dim, sparse_uses_idf, embedder)
        self.settings = settings
        self.dim = dim
        self.sparse_uses_idf = sparse_uses_idf
        self.t = q.Tables(settings.pgvector_table)
        self.url = q.libpq_url(settings.pgvector_url or settings.database_url)
        self._create(replace)
        self._pool = ConnectionPool(self.url, min_size=1, max_size=POOL_SIZE, open=True, configure=register_vector,
                                    kwargs={"prepare_threshold": None}, check=ConnectionPool.check_connection,
                                    name=f"dcpm-{self.t.name}")
        try:
            self._pool.wait(timeout=CONNECT_SECONDS)
        except PoolTimeout as exc:
            self._pool.close()
            raise Unavailable("the pgvector index's PostgreSQL did not accept connections") from exc
        self._pending_lock = threading.Lock()
        self._pending: PendingPurge | None = None

    def _connect(self, **kwargs: Any) -> psycopg.Connection:
        try:
            return psycopg.connect(self.url, connect_timeout=int(CONNECT_SECONDS), **kwargs)
        except psycopg.OperationalError as exc:
            raise Unavailable(f"cannot reach the pgvector index's PostgreSQL: {exc.sqlstate or 'no answer'}") from exc

    def _create(self, replace: bool) -> None:
        """Extension and tables, created once by whichever process comes first; an index built
        for another embedder is refused, as the embedded shard refuses one, or dropped (`replace`)."""
        with self._connect() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [self.t.name])
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            self._tables(conn)
            meta = sql.SQL("SELECT dim, sparse_idf, embedder FROM {}").format(self.t.meta)
            row = conn.execute(meta).fetchone()
            found = dict(zip(("dim", "sparse_idf", "embedder"), row)) if row else None
            action = self.identity.settle(f"the pgvector index {self.t.name}", found, replace)
            if action == "replace":
                conn.execute(q.drop(self.t))
                self._tables(conn)
            if action != "keep":
                conn.execute(sql.SQL("DELETE FROM {}").format(self.t.meta))
                conn.execute(sql.SQL("INSERT INTO {} (dim, sparse_idf, embedder) VALUES (%s, %s, %s)")
                             .format(self.t.meta), [self.dim, self.sparse_uses_idf, self.identity.embedder])

    def _tables(self, conn: psycopg.Connection) -> None:
        had_users = conn.execute("SELECT to_regclass(%s) IS NOT NULL", [self.t.users_name]).fetchone()[0]
        for statement in q.schema(self.t, self.dim):
            conn.execute(statement)
        if not had_users:  # an index from before the per-user counts: count once
            for statement in q.backfill_users(self.t):
                conn.execute(statement)

    # --- writes -----------------------------------------------------------------------------
    def upsert(self, points: Sequence[IndexPoint]) -> None:
        """Rows, their terms and their users' counts in one transaction, in id order so concurrent
        writers of the same points lock them in the same order. A point keeps its user: an upsert
        that would move one to another user is refused (the counts could not follow it)."""
        if not points:
            return
        ordered = sorted(points, key=lambda p: p.id)
        ids = [p.id for p in ordered]
        terms = [(p.id, p.payload["user_id"], int(t), float(w)) for p in ordered
                 for t, w in zip(p.sparse.indices, p.sparse.values)]
        with self._pool.connection() as conn, conn.cursor() as cur:
            cur.executemany(  # xmax = 0: this statement inserted the row rather than updating it
                sql.SQL("INSERT INTO {t} AS v (id, payload, dense) VALUES (%s, %s, %s) ON CONFLICT (id) DO UPDATE "
                        "SET payload = EXCLUDED.payload, dense = EXCLUDED.dense WHERE v.user_id = EXCLUDED.user_id "
                        "RETURNING v.user_id, v.xmax = 0").format(t=self.t.points),
                [(p.id, Jsonb(p.payload), np.asarray(p.dense, dtype=np.float32)) for p in ordered], returning=True)
            written = [row for _ in _results(cur) for row in cur.fetchall()]
            if len(written) < len(ordered):
                raise Invalid("a point of the pgvector index cannot move to another user")
            cur.execute(sql.SQL("DELETE FROM {} WHERE point_id = ANY(%s)").format(self.t.terms), [ids])
            if terms:
                columns = [list(column) for column in zip(*terms)]
                cur.execute(sql.SQL("INSERT INTO {} (point_id, user_id, term, weight) "
                                    "SELECT * FROM unnest(%s::text[], %s::text[], %s::bigint[], %s::real[])")
                            .format(self.t.terms), columns)
            self._count_users(cur, Counter(user for user, inserted in written if inserted))

    def delete(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        with self._pool.connection() as conn, conn.cursor() as cur:  # the terms go with their point (CASCADE)
            locked = self._lock_in_id_order(cur, ids)
            gone = cur.execute(sql.SQL("DELETE FROM {} WHERE id = ANY(%s) RETURNING user_id").format(self.t.points),
                               [locked]).fetchall()
            self._count_users(cur, Counter({user: -n for user, n in Counter(row[0] for row in gone).items()}))
        if gone:
            self._note_delete()

    def _lock_in_id_order(self, cur: psycopg.Cursor, ids: Sequence[str]) -> list[str]:
        """Lock rows in id order as upserts do; the DELETE or UPDATE then touches these ids only (by
        itself it locks in scan order, and rows committed meanwhile out of order: deadlocks in CI)."""
        query = sql.SQL("SELECT id FROM {} WHERE id = ANY(%s) ORDER BY id FOR UPDATE").format(self.t.points)
        return [row[0] for row in cur.execute(query, [sorted(ids)]).fetchall()]

    def _count_users(self, cur: psycopg.Cursor, change: Counter) -> None:
        """Apply each user's change in points, last in the write's transaction (q.count_users)."""
        users = sorted(user for user, n in change.items() if n)
        if users:
            cur.execute(q.count_users(self.t), [users, [change[user] for user in users]])
            cur.execute(q.drop_empty_users(self.t), [users])

    def set_payload(self, ids: Sequence[str], payload: dict[str, Any]) -> None:
        if "user_id" in payload:
            raise Invalid("a point of the pgvector index cannot move to another user")
        if ids:
            with self._pool.connection() as conn, conn.cursor() as cur:
                locked = self._lock_in_id_order(cur, ids)
                cur.execute(sql.SQL("UPDATE {} SET payload = payload || %s WHERE id = ANY(%s)").format(self.t.points),
                            [Jsonb(payload), locked])

    # --- reads ------------------------------------------------------------------------------
    def query(self, using: str, vector: np.ndarray | SparseVector, scope: Scope, limit: int) -> list[Hit]:
        if isinstance(vector, SparseVector):
            return self._lexical(vector, scope, limit) if vector.indices else []
        if using != DENSE:
            raise Invalid(f"the pgvector index has no vector named {using!r}")
        return self._nearest(np.asarray(vector, dtype=np.float32), scope, limit)

    def _nearest(self, vector: np.ndarray, scope: Scope, limit: int) -> list[Hit]:
        """Through the user's HNSW graph when they have one (ordering by the distance operator is
        what lets the planner use it), else, or when that left too few hits, exactly (ordering by
        the similarity, an expression no index provides)."""
        predicate, params = q.where(scope_conditions(scope))
        base = sql.SQL("SELECT v.id, 1 - (v.dense <=> %s) AS score FROM {} v WHERE {} ").format(
            self.t.points, predicate)
        with self._pool.connection() as conn:
            graph = conn.execute("SELECT to_regclass(%s) IS NOT NULL", [self.t.user_hnsw(scope.user_id)]).fetchone()
            if graph and graph[0]:
                ef_search = min(MAX_EF_SEARCH, max(self.settings.hnsw_ef, limit))
                conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(ef_search)))
                rows = conn.execute(base + sql.SQL("ORDER BY v.dense <=> %s LIMIT %s"),
                                    [vector, *params, vector, limit]).fetchall()
                if len(rows) >= limit:
                    return _hits(rows)
            rows = conn.execute(base + sql.SQL("ORDER BY score DESC, v.id LIMIT %s"),
                                [vector, *params, limit]).fetchall()
        return _hits(rows)

    def _lexical(self, vector: SparseVector, scope: Scope, limit: int) -> list[Hit]:
        """BM25 over the user's points: sum of query weight x stored term weight x IDF, with
        IDF = ln((N - n + 0.5) / (n + 0.5) + 1) over the user's N points, n of which hold the
        term (an embedder that weighs its own terms scores by the plain dot product)."""
        predicate, params = q.where(scope_conditions(scope))
        idf = "ln((total.n - df.n + 0.5) / (df.n + 0.5) + 1)" if self.sparse_uses_idf else "1"
        statement = sql.SQL(
            "WITH query(term, weight) AS (SELECT * FROM unnest(%s::bigint[], %s::float8[])), "
            "df AS (SELECT t.term, count(*) AS n FROM {terms} t JOIN query USING (term) "
            "       WHERE t.user_id = %s GROUP BY t.term), "
            "total AS MATERIALIZED (SELECT points AS n FROM {users} WHERE user_id = %s), "  # once, not per row
            "scored AS (SELECT t.point_id, sum(query.weight * t.weight * {idf}) AS score "
            "           FROM {terms} t JOIN query USING (term) JOIN df USING (term) CROSS JOIN total "
            "           WHERE t.user_id = %s GROUP BY t.point_id) "
            "SELECT v.id, s.score FROM scored s JOIN {points} v ON v.id = s.point_id "
            "WHERE {predicate} ORDER BY s.score DESC, v.id LIMIT %s"
        ).format(terms=self.t.terms, points=self.t.points, users=self.t.users, idf=sql.SQL(idf), predicate=predicate)
        user = scope.user_id
        with self._pool.connection() as conn:
            rows = conn.execute(statement, [[int(i) for i in vector.indices], [float(w) for w in vector.values],
                                            user, user, user, *params, limit]).fetchall()
        return _hits(rows)

    def dense_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        rows = self._by_id(sql.SQL(", dense"), ids) if ids else []
        return {row[0]: row[1].to_numpy().astype(np.float32) for row in rows}

    def dense_scores(self, vector: np.ndarray, ids: Sequence[str]) -> dict[str, float]:
        rows = self._by_id(sql.SQL(", 1 - (dense <=> %s)"), ids, np.asarray(vector, dtype=np.float32)) if ids else []
        return {row[0]: float(row[1]) for row in rows}

    def existing(self, ids: Sequence[str]) -> set[str]:
        return {row[0] for row in self._by_id(sql.SQL(""), ids)} if ids else set()

    def ids(self) -> Iterator[str]:
        with self._pool.connection() as conn:  # read at once (36 bytes a point), not holding a connection
            return iter([row[0] for row in conn.execute(sql.SQL("SELECT id FROM {}").format(self.t.points))])

    def _by_id(self, columns: sql.Composable, ids: Sequence[str], *params: Any) -> list:
        with self._pool.connection() as conn:  # q.by_id: id, then `columns`, whose parameters come first
            return conn.execute(q.by_id(self.t, columns), [*params, list(ids)]).fetchall()

    def count(self, user_id: str | None = None) -> int:
        """Every point, or one user's: T_users' row, kept by the writes (a read, not a scan)."""
        with self._pool.connection() as conn:
            row = conn.execute(*q.count(self.t, user_id)).fetchone()
        return int(row[0]) if row else 0

    # --- upkeep -----------------------------------------------------------------------------
    def optimize(self) -> bool:
        """Give every user past `pgvector_user_hnsw_rows` points an HNSW graph of their own
        (built concurrently: writes and searches go on). One process builds at a time."""
        with self._connect(autocommit=True) as conn:
            return build_user_graphs(conn, self.t, self.settings)

    def clear(self) -> None:
        """Truncate (the files are given back) and drop the per-user graphs, so a rebuild bulk-
        loads and `optimize` builds each graph once from the complete rows."""
        with self._pool.connection() as conn:
            conn.execute(sql.SQL("TRUNCATE {}, {}, {}").format(self.t.terms, self.t.points, self.t.users))
        with self._connect(autocommit=True) as conn:
            drop_user_graphs(conn, self.t)
        with self._pending_lock:
            self._pending = None

    def _note_delete(self) -> None:
        now = time.monotonic()
        with self._pending_lock:
            self._pending = PendingPurge(self._pending.since if self._pending else now, now)

    def pending_purge(self) -> PendingPurge | None:
        return self._pending

    def compact(self) -> bool:
        """VACUUM after this process's deletes: dead rows leave the heap and every index (the
        HNSW graphs are repaired around them); their space is free for reuse from then on."""
        pending = self._pending
        if pending is None:
            return False
        with self._connect(autocommit=True) as conn:
            conn.execute(sql.SQL("VACUUM {}, {}").format(self.t.points, self.t.terms))
        with self._pending_lock:
            if self._pending == pending:  # else a delete came meanwhile: the next round vacuums it
                self._pending = None
        return True

    def close(self) -> None:
        self._pool.close()


def _results(cur: psycopg.Cursor):
    """Step through the result of each statement of an `executemany(..., returning=True)`."""
    while True:
        yield cur
        if not cur.nextset():
            return


def _hits(rows: list) -> list[Hit]:
    return [Hit(row[0], float(row[1])) for row in rows]
