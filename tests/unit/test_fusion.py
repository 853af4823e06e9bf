from dcpm.read.fusion import fuse


def test_dense_and_sparse_agreement_ranks_first():
    dense = {"tea": 0.8, "dog": 0.3, "car": 0.5}
    sparse = {"tea": 7.0, "car": 1.0}
    ranked = [f.id for f in fuse(dense, sparse, alpha=0.7)]
    assert ranked == ["tea", "car", "dog"]


def test_strong_lexical_match_can_overtake_a_slightly_closer_vector():
    dense = {"paraphrase": 0.62, "exact_name": 0.60, "other": 0.10}
    sparse = {"exact_name": 9.0}
    ranked = [f.id for f in fuse(dense, sparse, alpha=0.7)]
    assert ranked[0] == "exact_name"


def test_alpha_one_is_dense_order():
    dense = {"a": 0.1, "b": 0.9, "c": 0.5}
    sparse = {"a": 100.0}
    assert [f.id for f in fuse(dense, sparse, alpha=1.0)] == ["b", "c", "a"]


def test_no_sparse_candidates_falls_back_to_dense_only():
    fused = fuse({"a": 0.2, "b": 0.4}, {}, alpha=0.7)
    assert [f.id for f in fused] == ["b", "a"]
    assert fused[0].score == 1.0


def test_empty_inputs_give_no_hits():
    assert fuse({}, {}, alpha=0.7) == []


def test_lexical_scores_span_their_full_range_and_a_missed_candidate_gets_the_floor():
    # Scaling over lexical hits only: the best hit gets full lexical credit, the weakest hit and a
    # candidate the lexical retriever never returned both get none (raw zeros do not squeeze it).
    dense = {"a": 0.50, "b": 0.50, "c": 0.10}
    sparse = {"b": 2.0, "c": 4.0}
    fused = {f.id: round(f.score, 6) for f in fuse(dense, sparse, alpha=0.7)}
    assert fused == {"a": 0.7, "b": 0.7, "c": 0.3}
