from dataclasses import replace

import pytest

from dcpm.read.fusion import Calibration, fuse

SCORES = Calibration(alpha=0.8, dense_center=0.35, dense_width=0.08, lexical_k=6.0)


def test_dense_and_sparse_agreement_ranks_first():
    dense = {"tea": 0.8, "dog": 0.3, "car": 0.5}
    sparse = {"tea": 7.0, "car": 1.0}
    ranked = [f.id for f in fuse(dense, sparse, SCORES)]
    assert ranked == ["tea", "car", "dog"]


def test_strong_lexical_match_can_overtake_a_slightly_closer_vector():
    dense = {"paraphrase": 0.42, "exact_name": 0.40, "other": 0.10}
    sparse = {"exact_name": 9.0}
    ranked = [f.id for f in fuse(dense, sparse, SCORES)]
    assert ranked[0] == "exact_name"


def test_alpha_one_is_dense_order():
    dense = {"a": 0.1, "b": 0.9, "c": 0.5}
    sparse = {"a": 100.0}
    assert [f.id for f in fuse(dense, sparse, Calibration(1.0, 0.35, 0.08, 6.0))] == ["b", "c", "a"]


def test_best_candidate_of_an_unrelated_query_scores_low_not_one():
    # Min-max scaling gave the best of a bad lot 1.0; absolute scores leave it where it is.
    fused = fuse({"a": 0.12, "b": 0.08}, {}, SCORES)
    assert [f.id for f in fused] == ["a", "b"]
    assert fused[0].score < 0.05


def test_score_is_the_weighted_sum_of_its_parts():
    fused = fuse({"a": 0.55, "b": 0.30}, {"a": 6.0}, SCORES)
    for f in fused:
        assert f.score == pytest.approx(0.8 * f.dense_relevance + 0.2 * f.lexical_relevance)
    a = fused[0]
    assert a.lexical_relevance == pytest.approx(0.5)  # k is the BM25 score worth half the lexical evidence
    assert a.dense_relevance > 0.9 and fused[1].lexical_relevance == 0.0


def test_the_same_memory_scores_the_same_whatever_else_is_stored():
    alone = fuse({"a": 0.5}, {"a": 3.0}, SCORES)[0].score
    crowded = fuse({"a": 0.5, "b": 0.9, "c": 0.1}, {"a": 3.0, "b": 30.0}, SCORES)
    assert next(f.score for f in crowded if f.id == "a") == alone


def test_empty_inputs_give_no_hits():
    assert fuse({}, {}, SCORES) == []


def test_power_one_is_the_plain_saturation():
    flat = Calibration(alpha=0.5, dense_center=0.3, dense_width=0.25, lexical_k=20.0, lexical_power=1.0)
    for bm25 in (1.0, 10.0, 20.0, 80.0):
        assert fuse({"a": 0.3}, {"a": bm25}, flat)[0].lexical_relevance == pytest.approx(bm25 / (bm25 + 20.0))


def test_a_steeper_lexical_part_discounts_a_weak_shared_word_but_not_a_strong_match():
    # A query that shares one common word with many turns (BM25 ~ 10) must not lift them above the
    # turn it is about, which shares no word with it; a strong match (BM25 ~ 40) still counts fully.
    steep = Calibration(alpha=0.5, dense_center=0.3, dense_width=0.25, lexical_k=20.0, lexical_power=3.0)
    flat = Calibration(alpha=0.5, dense_center=0.3, dense_width=0.25, lexical_k=20.0, lexical_power=1.0)
    dense, sparse = {"cue": 0.50, "shares_a_word": 0.35}, {"shares_a_word": 10.0}
    assert [f.id for f in fuse(dense, sparse, flat)][0] == "shares_a_word"
    assert [f.id for f in fuse(dense, sparse, steep)][0] == "cue"
    weak, half, strong = (fuse({"a": 0.3}, {"a": s}, steep)[0].lexical_relevance for s in (10.0, 20.0, 40.0))
    assert weak < 0.12 and half == pytest.approx(0.5) and strong > 0.88


def test_shared_words_count_only_as_far_as_the_memory_is_about_the_same_thing():
    # A trigger shares a word with a turn about something else altogether (cosine near 0) and with
    # none of its cue (cosine 0.35): with the gate the shared word no longer outranks the cue,
    # while a turn the dense model sees as related keeps its lexical evidence whole.
    gated = Calibration(alpha=0.5, dense_center=0.3, dense_width=0.25, lexical_k=20.0, lexical_power=3.0,
                        lexical_gate=0.15, lexical_gate_width=0.05)
    plain = replace(gated, lexical_gate=None)
    dense, sparse = {"cue": 0.35, "elsewhere": 0.02}, {"elsewhere": 25.0}
    assert [f.id for f in fuse(dense, sparse, plain)][0] == "elsewhere"
    assert [f.id for f in fuse(dense, sparse, gated)][0] == "cue"
    related = fuse({"a": 0.4}, {"a": 25.0}, gated)[0]
    assert related.lexical_relevance == pytest.approx(fuse({"a": 0.4}, {"a": 25.0}, plain)[0].lexical_relevance,
                                                      rel=0.01)
    assert related.score == pytest.approx(0.5 * related.dense_relevance + 0.5 * related.lexical_relevance)
