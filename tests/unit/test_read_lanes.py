"""The associative lane: the frozen hybrid ranking and the adapter's dense ranking fused by
reciprocal rank, scores staying the calibrated relevance (dcpm.read.lanes)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dcpm.embedding import SparseVector
from dcpm.index import Scope
from dcpm.index.base import DENSE, Hit
from dcpm.read.fusion import Calibration, fuse, score_of
from dcpm.read.grouping import group
from dcpm.read.lanes import reciprocal_rank, with_associative_lane
from dcpm.read.query import QueryVector

SCORING = Calibration(alpha=0.5, dense_center=0.30, dense_width=0.25, lexical_k=30.0)
THRESHOLD = 0.37


def unit(angle_degrees: float) -> np.ndarray:
    """A unit vector in the plane whose cosine with the x axis is cos(angle)."""
    angle = math.radians(angle_degrees)
    return np.array([math.cos(angle), math.sin(angle), 0.0], dtype=np.float32)


# Ana's memories as points in a toy 3-d space: the frozen query points along x (what she asked,
# word for word), the associative one along y (what it reminds of).
MEMORIES = {
    "espresso": unit(10),  # the lookup answer: close to the frozen query
    "coffee-shop": unit(30),
    "insomnia": unit(80),  # only the adapter connects "can't sleep" to the espressos
    "palpitations": unit(70),
    "tax-return": np.array([0.0, 0.0, 1.0], dtype=np.float32),  # unrelated to both
}
FROZEN, ASSOCIATIVE = unit(0), unit(90)


class TinyIndex:
    """Exact nearest neighbours over MEMORIES; records the ANN queries made."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    def query(self, using, vector, scope, limit):
        assert using == DENSE
        self.queries.append(using)
        scored = sorted(((float(v @ vector), i) for i, v in MEMORIES.items()), reverse=True)[:limit]
        return [Hit(i, s) for s, i in scored]

    def dense_scores(self, vector, ids):
        return {i: float(MEMORIES[i] @ vector) for i in ids if i in MEMORIES}


def frozen_hybrid(pool: int, bm25: dict[str, float]) -> list:
    dense = {i: float(v @ FROZEN) for i, v in sorted(MEMORIES.items(), key=lambda kv: -float(kv[1] @ FROZEN))[:pool]}
    for i in bm25:
        dense.setdefault(i, float(MEMORIES[i] @ FROZEN))
    return fuse(dense, bm25, SCORING)


def lane(pool: int = 3, bm25: dict[str, float] | None = None, lexical: bool = False) -> list:
    query = QueryVector(FROZEN, SparseVector([], []), "test", associative=ASSOCIATIVE)
    return with_associative_lane(TinyIndex(), query, Scope(user_id="ana"), pool, frozen_hybrid(pool, bm25 or {}),
                                 SCORING, k=60, lexical=lexical)


def test_reciprocal_rank_puts_what_both_lists_agree_on_first_and_keeps_what_only_one_found():
    fused = reciprocal_rank([["a", "b", "c"], ["b", "d"]], k=60)
    assert fused[0] == "b" and set(fused) == {"a", "b", "c", "d"}
    assert fused.index("a") < fused.index("c") and fused.index("d") < fused.index("c")


def test_reciprocal_rank_with_a_small_constant_favours_the_top_of_each_list():
    lists = [["a", "x", "y", "b"], ["c", "z", "w", "b"]]  # b is fourth in both
    assert reciprocal_rank(lists, k=1)[:2] == ["a", "c"]
    assert reciprocal_rank(lists, k=60)[0] == "b"


def test_lane_keeps_the_frozen_top_hits_and_adds_memories_only_the_adapter_finds():
    ids = [f.id for f in lane(pool=2)]
    assert ids[:2] == ["espresso", "insomnia"]  # each lane's best, ahead of each lane's second
    assert set(ids) == {"espresso", "coffee-shop", "insomnia", "palpitations"}
    assert "tax-return" not in ids


def test_lane_scores_stay_the_calibrated_relevance_of_the_closer_query_vector():
    for fused in lane(pool=3, bm25={"coffee-shop": 12.0}):
        memory = MEMORIES[fused.id]
        cosine = max(float(memory @ FROZEN), float(memory @ ASSOCIATIVE))
        bm25 = 12.0 if fused.id == "coffee-shop" else 0.0
        assert fused.dense == pytest.approx(cosine, abs=1e-6) and fused.sparse == bm25
        assert fused.score == pytest.approx(score_of(fused.id, cosine, bm25, SCORING).score, abs=1e-6)


def test_a_memory_unrelated_to_both_query_vectors_scores_below_the_threshold():
    scored = {f.id: f.score for f in lane(pool=5)}
    assert scored["tax-return"] < THRESHOLD < scored["espresso"]
    assert scored["insomnia"] > THRESHOLD  # the association counts as relevance, not only as rank


def test_a_lexical_lane_also_ranks_what_the_words_match_so_it_climbs_the_fused_order():
    words = {"tax-return": 200.0}  # the query names the tax return, though neither vector is close
    plain = [f.id for f in lane(pool=3, bm25=words)]
    lexical = [f.id for f in lane(pool=3, bm25=words, lexical=True)]
    assert set(plain) == set(lexical) and lexical.index("tax-return") < plain.index("tax-return")


def test_without_an_associative_vector_the_hybrid_ranking_is_returned_as_it_is():
    hybrid = frozen_hybrid(3, {})
    query = QueryVector(FROZEN, SparseVector([], []), "frozen")
    index = TinyIndex()
    assert with_associative_lane(index, query, Scope(user_id="ana"), 3, hybrid, SCORING, k=60) is hybrid
    assert index.queries == []


def test_grouping_in_fused_order_keeps_the_order_and_a_memory_takes_its_turns_better_rank():
    turn, item, other = (score_of("turn", 0.5, 0, SCORING), score_of("item", 0.9, 0, SCORING),
                         score_of("other", 0.2, 0, SCORING))
    grouped = group([other, turn, item], {"item": "turn"}, in_order=True)
    assert [g.id for g in grouped] == ["other", "item"]  # rank order, not score order
    assert grouped[1].best is item and grouped[1].source is turn
    assert [g.id for g in group([other, turn, item], {"item": "turn"})] == ["item", "other"]


def test_a_lighter_associative_list_moves_less_of_the_fused_order():
    """The lane weight scales the associative list's votes: at 1 an adapter-only first hit beats
    the frozen list's second, at 0.6 it no longer does, at 0 the frozen order is kept whole."""
    frozen, associative = ["a", "b", "c"], ["x", "a"]
    assert reciprocal_rank([frozen, associative], k=1)[:2] == ["a", "x"]
    assert reciprocal_rank([frozen, associative], k=1, weights=(1.0, 0.6))[:3] == ["a", "b", "x"]
    assert reciprocal_rank([frozen, associative], k=1, weights=(1.0, 0.0))[:3] == ["a", "b", "c"]
