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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from dcpm.embedding.base import SparseVector

log = logging.getLogger("dcpm.index")
TERMS = "terms"  # payload field: the point's BM25 term ids
RECORD_KEY, PER_USER = "idf", "user"  # in the index's record: how its IDF is counted
REFRESH_SECONDS = 60.0
MAX_USERS_REMEMBERED = 10_000
Owned = tuple[str, Sequence[int]]  # a point's user and its BM25 term ids


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
    """How many of a user's points there are and how many hold a term, read from the index once
    and then kept: a count per query term cost 4.5 ms a search at 10,000 memories (counted
    filters), while the words a user asks about recur. This process's own writes move the counts
    it holds by the points they replace (`writing`), rather than dropping them: in a chat every
    search follows a write of the same user, and reading its terms again cost 6.7 ms of a 19 ms
    search at 20,000 memories (scripts/bench_search.py --after-write). `refresh_seconds` re-reads
    a count that old, for an index other processes write too (a shared Qdrant): their writes show
    within it, and a minute's writes move a logarithm by little (as dcpm.read.lexical_scale)."""

    def __init__(self, points: Callable[[str], int], holding: Callable[[str, int], int],
                 terms_of: Callable[[Sequence[str]], list[Owned]], refresh_seconds: float | None = REFRESH_SECONDS):
        self._points, self._holding, self._terms_of = points, holding, terms_of
        self.refresh_seconds = refresh_seconds
        self._seen: dict[str, dict[int | None, tuple[float, int]]] = {}
        self._writes: dict[str, int] = {}  # users with a write in flight: no count read meanwhile is kept
        self._version: dict[str, int] = {}  # per user, moved by every write: a count read across one is not kept
        self._epoch = 0  # moved by `_reset`, which forgets versions
        self._lock = threading.Lock()

    def weighted(self, query: SparseVector, user_id: str) -> SparseVector:
        """The query's term weights times each term's IDF over the user's points."""
        points = self._read(user_id, None)
        return SparseVector(indices=list(query.indices), values=[
            value * idf(points, self._read(user_id, term)) for term, value in zip(query.indices, query.values)])

    def forget(self, user_ids: Iterable[str] | None = None) -> None:
        """These users' counts (every user's when None) are read afresh."""
        with self._lock:
            if user_ids is None:
                self._reset()
            for user_id in user_ids or ():
                self._seen.pop(user_id, None)
                self._version[user_id] = self._version.get(user_id, 0) + 1

    @contextmanager
    def writing(self, ids: Sequence[str], points: Sequence[Owned]) -> Iterator[None]:
        """Around this process's write that makes the points `ids` into `points` ((user, terms)
        each; none for a delete), with no other write of these ids at the same time: the counts
        held for their users follow it. A write that fails forgets them (done or not, who knows)."""
        before = [(user, set(terms)) for user, terms in self._terms_of(ids)] if ids else []
        after = [(user, set(terms)) for user, terms in points]
        users = {user for user, _ in before} | {user for user, _ in after}
        self._moved(users, +1)
        try:
            yield
        except BaseException:
            self.forget(users)
            self._moved(users, -1)
            raise
        with self._lock:
            for user_id in users & self._seen.keys():
                _shift(self._seen[user_id], [t for u, t in after if u == user_id], +1)
                _shift(self._seen[user_id], [t for u, t in before if u == user_id], -1)
        self._moved(users, -1)

    def _moved(self, users: set[str], writes: int) -> None:
        with self._lock:
            for user_id in users:
                self._version[user_id] = self._version.get(user_id, 0) + 1
                self._writes[user_id] = self._writes.get(user_id, 0) + writes
                if not self._writes[user_id]:
                    del self._writes[user_id]
            if len(self._version) > MAX_USERS_REMEMBERED:
                self._reset()

    def _reset(self) -> None:
        """Forget every count held, and the versions of users with no write in flight (under the
        lock); moving the epoch makes a count being read meanwhile go unkept, as a version would."""
        self._seen.clear()
        self._version = {user_id: self._version[user_id] for user_id in self._writes}
        self._epoch += 1

    def _read(self, user_id: str, term: int | None) -> int:
        now = time.monotonic()
        with self._lock:
            found = self._seen.get(user_id, {}).get(term)
            version = (self._epoch, self._version.get(user_id, 0))
        if found is None or (self.refresh_seconds is not None and now - found[0] > self.refresh_seconds):
            found = (now, self._points(user_id) if term is None else self._holding(user_id, term))
            with self._lock:
                if version != (self._epoch, self._version.get(user_id, 0)) or user_id in self._writes:
                    return found[1]  # a write came in between: this count may miss it
                if len(self._seen) >= MAX_USERS_REMEMBERED:
                    self._reset()
                self._seen.setdefault(user_id, {})[term] = found
        return found[1]


def _shift(seen: dict[int | None, tuple[float, int]], points: list[set[int]], sign: int) -> None:
    """Move a user's held counts by `points` (each point's terms) coming (+1) or going (-1)."""
    for key, (read_at, count) in seen.items():
        moved = len(points) if key is None else sum(key in terms for terms in points)
        seen[key] = (read_at, count + sign * moved)


def with_terms(payload: dict[str, Any], sparse: SparseVector) -> dict[str, Any]:
    return {**payload, TERMS: list(sparse.indices)}
