"""A search scope (dcpm.index.base.Scope) as a qdrant-edge filter."""

from __future__ import annotations

import qdrant_edge as qe

from dcpm.index.base import Condition, Equals, NotEquals, OneOf, Scalar, Scope, as_keyword, scope_conditions


def match(key: str, value: Scalar) -> qe.FieldCondition:
    return qe.FieldCondition(key=key, match=qe.MatchValue(value))


def scope_filter(scope: Scope) -> qe.Filter:
    """Every condition must hold; a NotEquals is a `must_not` match, so a point without the key passes."""
    conditions = scope_conditions(scope)
    return qe.Filter(must=[_condition(c) for c in conditions if not isinstance(c, NotEquals)],
                     must_not=[_condition(c) for c in conditions if isinstance(c, NotEquals)] or None)


def _condition(condition: Condition) -> qe.FieldCondition:
    """The positive match of a condition (a NotEquals matches the value that it excludes)."""
    if isinstance(condition, (Equals, NotEquals)):
        condition = as_keyword(condition)
        return match(condition.key, condition.value)
    if isinstance(condition, OneOf):
        return qe.FieldCondition(key=condition.key, match=qe.MatchAny(list(condition.values)))
    return qe.FieldCondition(key=condition.key, range=qe.RangeFloat(**{condition.op: condition.value}))
