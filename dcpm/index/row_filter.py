"""Metadata conditions (dcpm.index.base) as SQL over the relational store's JSON `metadata`
column, for listings, which page through the store rather than the index. They select what the
index's payload filter selects: exact values, type included; a list stored under a key matches
when one of its elements does (as Qdrant matches arrays); a NotEquals holds for a row without the
key. SQLite and PostgreSQL spell this differently, and SQLAlchemy's generic JSON accessors
compare text or cast (an error on PostgreSQL for a mistyped value), so each dialect is written
out here."""

from __future__ import annotations

from typing import Sequence

from sqlalchemy import ColumnElement, and_, cast, exists, false, func, not_, or_, select, true

from dcpm.errors import Invalid
from dcpm.index.base import METADATA, Condition, Equals, NotEquals, OneOf, Scalar

_PREFIX = f"{METADATA}."


def _sqlite_type(value: Scalar) -> str:
    """json_each's name for the JSON type of a value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "integer" if isinstance(value, int) else "text"


def _holds(column: ColumnElement, name: str, value: Scalar, dialect: str) -> ColumnElement[bool]:
    """The metadata value under `name` is `value`, or is a list with `value` among its elements;
    never NULL, so its negation is exact."""
    if dialect == "postgresql":
        # jsonb containment, exact and typed: {"food": "x"} holds {"food": "x"}, {"food": ["x", "y"]} holds ["x"]
        from sqlalchemy.dialects.postgresql import JSONB  # only PostgreSQL stores need the dialect

        document = cast(column, JSONB)
        return or_(document.contains({name: value}), document.contains({name: [value]}))
    # json_each walks a scalar as one row and an array as its elements
    elements = func.json_each(column, f'$."{name}"').table_valued("value", "type")
    matching = select(1).select_from(elements).where(elements.c.type == _sqlite_type(value))
    if not isinstance(value, bool):
        matching = matching.where(elements.c.value == value)
    return exists(matching)


def metadata_clause(column: ColumnElement, conditions: Sequence[Condition], dialect: str) -> ColumnElement[bool]:
    """All `conditions` (keys `metadata.<name>`) as one WHERE clause on `column`."""
    clauses: list[ColumnElement[bool]] = []
    for condition in conditions:
        if not condition.key.startswith(_PREFIX):
            raise Invalid(f"{condition.key} is not a metadata condition")
        name = condition.key.removeprefix(_PREFIX)
        if isinstance(condition, Equals):
            clauses.append(_holds(column, name, condition.value, dialect))
        elif isinstance(condition, NotEquals):
            clauses.append(not_(_holds(column, name, condition.value, dialect)))
        elif isinstance(condition, OneOf):
            clauses.append(or_(false(), *(_holds(column, name, value, dialect) for value in condition.values)))
        else:
            raise Invalid(f"range conditions on metadata ({condition.key}) are not supported")
    return and_(true(), *clauses)
