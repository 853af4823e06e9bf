"""Madeleine 4.4: InfoNCE on the summed test-time score over same-source negatives.

The score trained is the one served, s = cos(E(q),E(m)) + cos(E_θ(q),E(m)): training the
association term alone and adding similarity later counts similarity twice (Proposition 1;
-5.3 points in the paper's ablation). The memory side is frozen, so every row competes
against the whole fact bank of its source instead of a few in-batch facts.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np


def allowed_candidates(bank: np.ndarray, sources: Sequence[str], max_cos: float) -> np.ndarray:
    """allowed[g, m]: may fact m appear in the softmax of a row whose gold is fact g?

    Yes for g itself and for facts of g's source whose cosine to g is below `max_cos`
    (Eq. 6): near-duplicates of the gold are not negatives, and another source's fact may
    describe a related part of a life, so it must not be penalized either.
    """
    labels = np.asarray(sources)
    same_source = labels[:, None] == labels[None, :]
    allowed = same_source & (bank @ bank.T < max_cos)
    np.fill_diagonal(allowed, True)
    return allowed


QUERY_FORMS = ("summed", "adapted")


def summed_scores(frozen_queries: Any, adapted_queries: Any, bank: Any) -> Any:
    """s(q, m) = <E(q) + E_θ(q), E(m)> for unit vectors: the sum of both cosines (Eq. 5)."""
    return (frozen_queries + adapted_queries) @ bank.T


def served_scores(form: str, frozen_queries: Any, adapted_queries: Any, bank: Any) -> Any:
    """The score the read path will serve: summed (two passes per query), or "adapted", the
    cosine of E_θ(q) alone, one pass of the merged network per query. E_θ starts as E (LoRA's
    B is zero), so "adapted" is a residual in weight space rather than in the output."""
    if form == "adapted":
        return adapted_queries @ bank.T
    return summed_scores(frozen_queries, adapted_queries, bank)


def infonce_loss(scores: Any, gold: Any, allowed: Any, tau: float) -> Any:
    """Cross-entropy of the gold fact against the allowed candidates at temperature tau (Eq. 2)."""
    import torch

    logits = (scores / tau).masked_fill(~allowed, float("-inf"))
    return torch.nn.functional.cross_entropy(logits, gold)
