"""BM25's scale, so that one lexical calibration fits every store.

A BM25 score is a sum of IDFs, and the IDF of a word grows with the number of points N it is
counted over (ln N for a word one point holds): the same shared words score 5 among a new user's
200 memories and 8 in an index of 6,000. `score_lexical_k` is therefore set in units of that
rare word's IDF and multiplied by it here, per search: a fixed BM25 half point measured on a
large index discounted every lexical match of a small store (issue 15, scripts/eval_lexical.py).
N is read from the index at most once a minute per user (edge and server: per index); being off
by a few writes moves a logarithm by nothing."""

from __future__ import annotations

import threading
import time
import weakref

from dcpm.index import VectorIndex
from dcpm.index.user_idf import idf

REFRESH_SECONDS = 60.0
_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # index -> {user or None: (read at, N)}
_lock = threading.Lock()


def rare_word_idf(points: int) -> float:
    """Qdrant's IDF (dcpm.index.user_idf.idf) of a word held by n = 1 of N points (at least 1)."""
    return idf(max(points, 1), 1)


def lexical_scale(index: VectorIndex, user_id: str, weights_unit: float = 1.0) -> float:
    """The factor that turns `score_lexical_k` into BM25 points for this user's queries: the rare
    word's IDF, or `weights_unit` (`score_lexical_weights_unit`, one shared word's score) when the
    sparse channel carries a model's own weights (bge-m3: no IDF, no store size in them)."""
    if not index.sparse_uses_idf:
        return weights_unit
    key = user_id if index.idf_per_user else None
    now = time.monotonic()
    with _lock:
        seen = _cache.setdefault(index, {}).get(key)
    if seen is None or now - seen[0] > REFRESH_SECONDS:
        seen = (now, index.count(key))
        with _lock:
            _cache[index][key] = seen
    return rare_word_idf(seen[1])
