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
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from dcpm.embedding.base import SparseVector

log = logging.getLogger("dcpm.index")
TERMS = "terms"  # payload field: the point's BM25 term ids
RECORD_KEY, PER_USER = "idf", "user"  # in the index's record: how its IDF is counted
REFRESH_SECONDS = 60.0
MAX_USERS_REMEMBERED = 10_000


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


class Frequencies:
    """How many of a user's points there are and how many hold a term, each read from the index
    at most once a minute: a count per query term cost 4.5 ms a search at 10,000 memories (counted
    filters), while the words a user asks about recur. A user's entries are dropped when this
    process writes their points; another process's writes (a shared Qdrant) show within a minute,
    and a minute's writes move a logarithm by little (as dcpm.read.lexical_scale)."""

    def __init__(self, points: Callable[[str], int], holding: Callable[[str, int], int]):
        self._points, self._holding = points, holding
        self._seen: dict[str, dict[int | None, tuple[float, int]]] = {}
        self._lock = threading.Lock()

    def weighted(self, query: SparseVector, user_id: str) -> SparseVector:
        """The query's term weights times each term's IDF over the user's points."""
        points = self._read(user_id, None)
        return SparseVector(indices=list(query.indices), values=[
            value * idf(points, self._read(user_id, term)) for term, value in zip(query.indices, query.values)])

    def forget(self, user_ids: Iterable[str] | None = None) -> None:
        """After a write: these users' counts (every user's when None) are read afresh."""
        with self._lock:
            if user_ids is None:
                self._seen.clear()
            for user_id in user_ids or ():
                self._seen.pop(user_id, None)

    def _read(self, user_id: str, term: int | None) -> int:
        now = time.monotonic()
        with self._lock:
            found = self._seen.get(user_id, {}).get(term)
        if found is None or now - found[0] > REFRESH_SECONDS:
            found = (now, self._points(user_id) if term is None else self._holding(user_id, term))
            with self._lock:
                if len(self._seen) >= MAX_USERS_REMEMBERED:
                    self._seen.clear()
                self._seen.setdefault(user_id, {})[term] = found
        return found[1]


def with_terms(payload: dict[str, Any], sparse: SparseVector) -> dict[str, Any]:
    return {**payload, TERMS: list(sparse.indices)}
