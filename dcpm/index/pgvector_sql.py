"""The SQL of the pgvector backend: its tables and the payload conditions of a scope.

Four tables per index name (`Settings.pgvector_table`, here T):
- T: one row per point: id, the payload as jsonb (the source of truth, merged by `set_payload`
  as Qdrant merges top-level keys), the dense vector, and the payload fields every scope filters
  on as generated columns, so that `user_id` has a btree and the per-user HNSW graphs a
  predicate;
- T_terms: the point's BM25 term weights (or an embedder's lexical weights), one row per term,
  keyed by user so that a lexical query and its document frequencies read one user's rows only;
- T_users: each user's number of points, the N of BM25's IDF, kept by the writes themselves
  (see `count_users`) so that a lexical query reads one row instead of counting the user's points;
- T_meta: the dimension, IDF flag and embedder the index was built for (dcpm.index.identity).

These tables are derived data with a dimension that comes from the embedder, created at open
(`CREATE ... IF NOT EXISTS` under an advisory lock, so daemons starting together do not race)
rather than by the store's Alembic migrations, which run on SQLite too and know no embedder;
`dcpm reindex` rebuilds them from the store.
"""

from __future__ import annotations

import hashlib
import re

from psycopg import sql
from psycopg.types.json import Jsonb
from sqlalchemy.engine import make_url

from dcpm.errors import Invalid
from dcpm.index.base import Bound, Condition, Equals, NotEquals, OneOf

TABLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,39}$")  # leaves room for the suffixes within 63 bytes
# Payload fields with a column of their own: (column, SQL type of the generated value).
COLUMNS = {"user_id": "text", "kind": "text", "session_id": "text", "valid_from": "float8", "valid_to": "float8"}
BOUND_OPS = {"gt": ">", "gte": ">=", "lte": "<="}


def libpq_url(url: str) -> str:
    """A store URL as libpq takes it: `postgresql+psycopg://...` loses its driver suffix."""
    if not url:
        raise Invalid("index_backend is pgvector but no PostgreSQL is named: set DCPM_PGVECTOR_URL or "
                      "DCPM_DATABASE_URL")
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql":
        raise Invalid(f"the pgvector index needs a PostgreSQL URL, not {parsed.drivername}:// "
                      "(set pgvector_url or database_url)")
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


class Tables:
    """The identifiers of one index's tables and indexes."""

    def __init__(self, name: str):
        if not TABLE_NAME.fullmatch(name):
            raise Invalid(f"pgvector_table {name!r} must be a lower-case SQL name of at most 40 characters")
        self.name = name
        self.points = sql.Identifier(name)
        self.terms = sql.Identifier(f"{name}_terms")
        self.meta_name = f"{name}_meta"
        self.meta = sql.Identifier(self.meta_name)
        self.users_name = f"{name}_users"
        self.users = sql.Identifier(self.users_name)
        self.hnsw_prefix = f"{name}_hnsw_"

    def user_hnsw(self, user_id: str) -> str:
        """The name of one user's HNSW index: a digest, since a user id may be any string."""
        return self.hnsw_prefix + hashlib.sha256(user_id.encode()).hexdigest()[:16]


def schema(t: Tables, dim: int) -> list[sql.Composed]:
    """The statements that create the tables when missing (the extension is created first)."""
    generated = sql.SQL(", ").join(
        sql.SQL("{} {} GENERATED ALWAYS AS ((payload->>{})::{}) STORED").format(
            sql.Identifier(column), sql.SQL(kind), sql.Literal(column), sql.SQL(kind))
        for column, kind in COLUMNS.items())
    return [
        sql.SQL("CREATE TABLE IF NOT EXISTS {} (dim integer NOT NULL, sparse_idf boolean NOT NULL, "
                "one boolean PRIMARY KEY DEFAULT true CHECK (one))").format(t.meta),
        sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS embedder text").format(t.meta),  # since 0.x: NULL before
        sql.SQL("CREATE TABLE IF NOT EXISTS {} (id text PRIMARY KEY, payload jsonb NOT NULL, "
                "dense vector({}) NOT NULL, {})").format(t.points, sql.Literal(dim), generated),
        sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (user_id, kind)").format(
            sql.Identifier(f"{t.name}_user_kind"), t.points),
        sql.SQL("CREATE TABLE IF NOT EXISTS {} (point_id text NOT NULL REFERENCES {} (id) ON DELETE CASCADE, "
                "user_id text NOT NULL, term bigint NOT NULL, weight real NOT NULL, "
                "PRIMARY KEY (point_id, term))").format(t.terms, t.points),
        sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (user_id, term) INCLUDE (point_id, weight)").format(
            sql.Identifier(f"{t.name}_terms_user_term"), t.terms),
        sql.SQL("CREATE TABLE IF NOT EXISTS {} (user_id text PRIMARY KEY, points bigint NOT NULL)")
        .format(t.users),
    ]


def drop(t: Tables) -> sql.Composed:
    """Every table of the index (their indexes, the per-user graphs among them, go with them)."""
    return sql.SQL("DROP TABLE IF EXISTS {}, {}, {}, {}").format(t.terms, t.points, t.users, t.meta)


def backfill_users(t: Tables) -> list[sql.Composed]:
    """Fill T_users from the points, for an index created before it existed; writers wait
    meanwhile (SHARE lock), so no write falls between the count and the commit."""
    return [sql.SQL("LOCK TABLE {} IN SHARE MODE").format(t.points),
            sql.SQL("INSERT INTO {} (user_id, points) SELECT user_id, count(*) FROM {} GROUP BY user_id")
            .format(t.users, t.points)]


def by_id(t: Tables, columns: sql.Composable) -> sql.Composed:
    """The points named by an id array: their id, then `columns` (whose parameters come first)."""
    return sql.SQL("SELECT id{} FROM {} WHERE id = ANY(%s)").format(columns, t.points)


def count(t: Tables, user_id: str | None) -> tuple[sql.Composed, list]:
    """Every point, or one user's from T_users (no row: the user has none)."""
    if user_id is None:
        return sql.SQL("SELECT count(*) FROM {}").format(t.points), []
    return sql.SQL("SELECT points FROM {} WHERE user_id = %s").format(t.users), [user_id]


def count_users(t: Tables) -> sql.Composed:
    """Add a signed number of points to each user's count, in user order (concurrent writers of
    several users lock the rows in one order, so they cannot deadlock); a count the same
    transaction brought to zero is removed right after (`drop_empty_users`), so a deleted
    user's id stays nowhere. Run last in a write's transaction: the points are locked first.
    (No CHECK on the count: PostgreSQL checks the row proposed for insertion, a negative
    change, before it finds the conflict that turns it into an update.)"""
    return sql.SQL("INSERT INTO {users} AS u (user_id, points) "
                   "SELECT * FROM unnest(%s::text[], %s::bigint[]) ORDER BY 1 "
                   "ON CONFLICT (user_id) DO UPDATE SET points = u.points + EXCLUDED.points").format(users=t.users)


def drop_empty_users(t: Tables) -> sql.Composed:
    return sql.SQL("DELETE FROM {} WHERE user_id = ANY(%s) AND points <= 0").format(t.users)


def user_hnsw(t: Tables, user_id: str, m: int, ef_construction: int) -> sql.Composed:
    """One user's HNSW graph: a partial index the planner uses for exactly that user's queries
    (DCPM 3.1 m / ef_construct), so a filtered search walks a graph of that user's points only."""
    return sql.SQL("CREATE INDEX CONCURRENTLY IF NOT EXISTS {} ON {} USING hnsw (dense vector_cosine_ops) "
                   "WITH (m = {}, ef_construction = {}) WHERE user_id = {}").format(
        sql.Identifier(t.user_hnsw(user_id)), t.points, sql.Literal(m), sql.Literal(ef_construction),
        sql.Literal(user_id))


def where(conditions: list[Condition], alias: str = "v") -> tuple[sql.Composed, list]:
    """Every condition as one SQL predicate over the points table (aliased `alias`), with its
    parameters. Matches follow Qdrant's: a value matches a stored value of the same type or any
    element of a stored array (jsonb containment does both), a NotEquals passes a point without
    the key, and a range passes only numbers."""
    parts: list[sql.Composable] = []
    params: list = []
    for condition in conditions:
        part, values = _predicate(condition, sql.Identifier(alias))
        parts.append(part)
        params += values
    return sql.SQL(" AND ").join(parts) if parts else sql.SQL("true"), params


def _predicate(condition: Condition, alias: sql.Identifier) -> tuple[sql.Composed, list]:
    column = COLUMNS.get(condition.key)
    if isinstance(condition, Bound):
        op = sql.SQL(BOUND_OPS[condition.op])
        if column == "float8":
            return sql.SQL("{}.{} {} %s").format(alias, sql.Identifier(condition.key), op), [condition.value]
        value = sql.SQL("{}.payload #> %s").format(alias)
        return (sql.SQL("(CASE WHEN jsonb_typeof({}) = 'number' THEN ({}.payload #>> %s)::float8 END) {} %s")
                .format(value, alias, op), [_path(condition.key), _path(condition.key), condition.value])
    if isinstance(condition, Equals) and column == "text" and isinstance(condition.value, str):
        return sql.SQL("{}.{} = %s").format(alias, sql.Identifier(condition.key)), [condition.value]
    if isinstance(condition, OneOf) and column == "text" and all(isinstance(v, str) for v in condition.values):
        return sql.SQL("{}.{} = ANY(%s)").format(alias, sql.Identifier(condition.key)), [list(condition.values)]
    if isinstance(condition, Equals):
        return sql.SQL("{}.payload #> %s @> %s").format(alias), [_path(condition.key), Jsonb(condition.value)]
    if isinstance(condition, NotEquals):
        return (sql.SQL("NOT coalesce({}.payload #> %s @> %s, false)").format(alias),
                [_path(condition.key), Jsonb(condition.value)])
    if isinstance(condition, OneOf):
        return (sql.SQL("{}.payload #> %s @> ANY(%s::jsonb[])").format(alias),
                [_path(condition.key), [Jsonb(v) for v in condition.values]])
    raise Invalid(f"the pgvector index cannot express the condition {condition!r}")


def _path(key: str) -> list[str]:
    """A dotted payload key (`metadata.food`) as a jsonb path."""
    return key.split(".")
