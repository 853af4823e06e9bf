"""Cue recall: rank = 1 + candidates scored strictly above the gold, among allowed candidates."""

from __future__ import annotations

import numpy as np

from dcpm.adapter.training.evaluation import gold_ranks, recall_report, seen_in_training
from dcpm.adapter.training.lives import Fact


def test_rank_counts_only_allowed_candidates_scored_above_the_gold():
    bank = np.eye(3, dtype=np.float32)
    queries = np.array([[0.2, 0.9, 0.5], [0.2, 0.9, 0.5]], dtype=np.float32)
    everything = np.ones((2, 3), bool)
    own_source = np.array([[True, False, True], [True, True, True]])
    assert gold_ranks(queries, bank, np.array([0, 1]), everything).tolist() == [3, 1]
    assert gold_ranks(queries, bank, np.array([0, 1]), own_source).tolist() == [2, 1]


def test_recall_and_mrr_from_ranks():
    report = recall_report(np.array([1, 4, 12, 60]), ks=(1, 5, 10, 50))
    assert report["n"] == 4
    assert (report["R@1"], report["R@5"], report["R@10"], report["R@50"]) == (0.25, 0.5, 0.5, 0.75)
    assert abs(report["MRR"] - (1 + 1 / 4 + 1 / 12 + 1 / 60) / 4) < 1e-9


def test_a_held_out_fact_is_seen_only_when_a_training_fact_of_its_source_is_a_near_twin():
    held = [Fact(text="CPAP every night", source="assistant", persona_id="p"), Fact(text="a rare hobby", source="assistant", persona_id="p"),
            Fact(text="CPAP every night", source="friends", persona_id="p")]
    training = [Fact(text="CPAP nightly", source="assistant", persona_id="p"), Fact(text="CPAP nightly too", source="assistant", persona_id="p")]
    unit = np.sqrt(0.5)
    held_bank = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    training_bank = np.array([[0.99, 0.141], [unit, unit]])
    assert seen_in_training(held, held_bank, training, training_bank, 0.85).tolist() == [True, False, False]
    assert seen_in_training(held, held_bank, [], np.zeros((0, 2)), 0.85).tolist() == [False, False, False]
