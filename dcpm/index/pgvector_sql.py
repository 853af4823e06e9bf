"""The SQL of the pgvector backend: its tables and the payload conditions of a scope.

Three tables per index name (`Settings.pgvector_table`, here T):
- T: one row per point: id, the payload as jsonb (the source of truth, merged by `set_payload`
  as Qdrant merges top-level keys), the dense vector, and the payload fields every scope filters
  on as generated columns, so that `user_id` has a btree and the per-user HNSW graphs a
  predicate;
- T_terms: the point's BM25 term weights (or an embedder's lexical weights), one row per term,
  keyed by user so that a lexical query and its document frequencies read one user's rows only;
- T_meta: the dimension and IDF flag the index was built for.

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

from dcpm.errors import Invalid
from dcpm.index.base import Bound, Condition, Equals, NotEquals, OneOf

TABLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,39}$")  # leaves room for the suffixes within 63 bytes
# Payload fields with a column of their own: (column, SQL type of the generated value).
COLUMNS = {"user_id": "text", "kind": "text", "session_id": "text", "valid_from": "float8", "valid_to": "float8"}
BOUND_OPS = {"gt": ">", "gte": ">=", "lte": "<="}


class Tables:
    """The identifiers of one index's tables and indexes."""

    def __init__(self, name: str):
        if not TABLE_NAME.match(name):
            raise Invalid(f"pgvector_table {name!r} must be a lower-case SQL name of at most 40 characters")
        self.name = name
        self.points = sql.Identifier(name)
        self.terms = sql.Identifier(f"{name}_terms")
        self.meta = sql.Identifier(f"{name}_meta")
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
        sql.SQL("CREATE TABLE IF NOT EXISTS {} (id text PRIMARY KEY, payload jsonb NOT NULL, "
                "dense vector({}) NOT NULL, {})").format(t.points, sql.Literal(dim), generated),
        sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (user_id, kind)").format(
            sql.Identifier(f"{t.name}_user_kind"), t.points),
        sql.SQL("CREATE TABLE IF NOT EXISTS {} (point_id text NOT NULL REFERENCES {} (id) ON DELETE CASCADE, "
                "user_id text NOT NULL, term bigint NOT NULL, weight real NOT NULL, "
                "PRIMARY KEY (point_id, term))").format(t.terms, t.points),
        sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (user_id, term) INCLUDE (point_id, weight)").format(
            sql.Identifier(f"{t.name}_terms_user_term"), t.terms),
    ]


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
