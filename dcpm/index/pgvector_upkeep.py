"""Upkeep of the pgvector index: the per-user HNSW graphs (DCPM 3.1 m / ef_construct).

A graph is a partial index over one user's rows, built with CREATE INDEX CONCURRENTLY so that
writes and searches of every user go on meanwhile. A build that fails leaves an invalid index
behind (PostgreSQL's rule for concurrent builds), which the next round drops and builds again.
Daemons sharing the database take turns through an advisory lock: one builds, the others skip.
"""

from __future__ import annotations

import psycopg
from psycopg import sql

from dcpm.config import Settings
from dcpm.index import pgvector_sql as q


def _graphs(conn: psycopg.Connection, t: q.Tables) -> dict[str, bool]:
    """The per-user graphs on the points table: name -> whether the index is valid."""
    rows = conn.execute("SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                        "WHERE i.indrelid = to_regclass(%s) AND starts_with(c.relname, %s)",
                        [t.name, t.hnsw_prefix]).fetchall()
    return {name: valid for name, valid in rows}


def build_user_graphs(conn: psycopg.Connection, t: q.Tables, settings: Settings) -> bool:
    """On an autocommit connection: build the graph of every user past the threshold who lacks
    one; returns whether any was built (False too when another process is building)."""
    lock = f"{t.name}:graphs"
    if not conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", [lock]).fetchone()[0]:
        return False
    try:
        conn.execute(sql.SQL("SET maintenance_work_mem = {}").format(sql.Literal(settings.pgvector_build_memory)))
        graphs = _graphs(conn, t)
        users = conn.execute(sql.SQL("SELECT user_id FROM {} GROUP BY user_id HAVING count(*) > %s").format(t.points),
                             [settings.pgvector_user_hnsw_rows]).fetchall()
        built = False
        for (user_id,) in users:
            name = t.user_hnsw(user_id)
            if graphs.get(name):
                continue
            if name in graphs:  # an earlier build failed half-way
                conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name)))
            conn.execute(q.user_hnsw(t, user_id, settings.hnsw_m, settings.hnsw_ef_construct))
            built = True
        return built
    finally:
        conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", [lock])


def drop_user_graphs(conn: psycopg.Connection, t: q.Tables) -> None:
    """On an autocommit connection: every per-user graph goes (after `clear`)."""
    for name in _graphs(conn, t):
        conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name)))
