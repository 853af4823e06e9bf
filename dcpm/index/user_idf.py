"""BM25's IDF counted over the querying user's own points, on the Qdrant backends.

Qdrant's IDF modifier counts every point of a shard or collection, so a user's lexical scores
moved with what other users stored: two memories of one user that differ in one word, searched
for that word, scored apart as soon as other users' memories held it, which told the user that
(and roughly how often) they did. An index built since keeps its sparse vectors without the
modifier and each point's term ids in an indexed payload field; a search weighs each query term
by the IDF over the user's N points, n of which hold it, ln((N - n + 0.5) / (n + 0.5) + 1)
(Qdrant's formula; pgvector computes the same in SQL). An index built before keeps the shared IDF,
with a warning at every open, until `dcpm reindex` rebuilds it."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

from dcpm.embedding.base import SparseVector

log = logging.getLogger("dcpm.index")
TERMS = "terms"  # payload field: the point's BM25 term ids
RECORD_KEY, PER_USER = "idf", "user"  # in the index's record: how its IDF is counted


def per_user(found: Mapping[str, Any] | None, sparse_uses_idf: bool, where: str = "") -> bool:
    """Whether the index recorded as `found` (None: about to be created) counts IDF per user."""
    if not sparse_uses_idf:
        return False
    if found is None or found.get(RECORD_KEY) == PER_USER:
        return True
    log.warning("%s counts BM25's IDF over every user's memories, so a user's scores tell which words other "
                "users' memories hold; run `dcpm reindex` to rebuild it with an IDF per user", where)
    return False


def record(identity: Mapping[str, Any], idf_per_user: bool) -> dict[str, Any]:
    return {**identity, RECORD_KEY: PER_USER} if idf_per_user else dict(identity)


def idf(points: int, holding: int) -> float:
    return math.log((points - holding + 0.5) / (holding + 0.5) + 1.0)


def weighted(query: SparseVector, points: int, holding: Callable[[int], int]) -> SparseVector:
    """The query's term weights times each term's IDF over the user's `points`, `holding(term)`
    of which hold it."""
    return SparseVector(indices=list(query.indices),
                        values=[value * idf(points, holding(term)) for term, value in zip(query.indices, query.values)])


def with_terms(payload: dict[str, Any], sparse: SparseVector) -> dict[str, Any]:
    return {**payload, TERMS: list(sparse.indices)}
