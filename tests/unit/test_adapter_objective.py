"""Madeleine 4.4 objective: summed score, same-source negatives, near-duplicates of the gold masked."""

from __future__ import annotations

import numpy as np
import torch

from dcpm.adapter.training.objective import allowed_candidates, infonce_loss, summed_scores


def unit(*rows: list[float]) -> np.ndarray:
    matrix = np.array(rows, dtype=np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def test_negatives_are_same_source_facts_not_too_close_to_the_gold():
    bank = unit([1, 0, 0], [0.99, 0.1, 0], [0, 1, 0], [0, 0, 1])
    allowed = allowed_candidates(bank, ["assistant", "assistant", "assistant", "friends"], max_cos=0.9)
    assert allowed[0].tolist() == [True, False, True, False]  # gold kept, near-duplicate and other source masked
    assert allowed[3].tolist() == [False, False, False, True]  # a lone fact competes only with itself


def test_summed_score_is_the_sum_of_both_cosines():
    bank = torch.tensor(unit([1, 0], [0, 1]))
    frozen, adapted = torch.tensor(unit([1, 1])), torch.tensor(unit([0, 1]))
    expected = frozen @ bank.T + adapted @ bank.T
    assert torch.allclose(summed_scores(frozen, adapted, bank), expected)


def test_masked_candidates_do_not_count_against_the_gold():
    scores = torch.tensor([[0.5, 0.9, 0.1]])
    gold = torch.tensor([0])
    everything = infonce_loss(scores, gold, torch.tensor([[True, True, True]]), tau=0.05)
    masked = infonce_loss(scores, gold, torch.tensor([[True, False, True]]), tau=0.05)
    assert masked < everything
    assert float(masked) < 1e-3  # with the stronger fact masked, the gold wins at tau = 0.05


def test_the_adapted_form_scores_by_the_adapted_cosine_alone():
    from dcpm.adapter.training.objective import served_scores

    bank = torch.tensor(unit([1, 0], [0, 1]))
    frozen, adapted = torch.tensor(unit([1, 0])), torch.tensor(unit([0, 1]))
    assert torch.allclose(served_scores("adapted", frozen, adapted, bank), adapted @ bank.T)
    assert torch.allclose(served_scores("summed", frozen, adapted, bank), summed_scores(frozen, adapted, bank))
