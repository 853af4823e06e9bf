"""Hybrid relevance (DCPM 3.1): score = alpha * dense + (1 - alpha) * lexical, where both parts
are absolute, in [0, 1], and mean the same thing for every query.

The dense part is the cosine of the unit-norm query and memory vectors through a logistic map
measured on data (`scripts/eval_scores.py`), so an unrelated memory scores near 0 and a
paraphrase near 1. The lexical part is a logistic of the log BM25 score, (s/k)^p / (1 + (s/k)^p):
half evidence at s = k, and with p > 1 a match on a word or two that many turns share (s well
below k) counts little while a strong one counts fully. With p = 1 (s / (s + k)) such weak matches
lifted every turn that shared a word with the query above the one it was about, which a query
sharing no word with its target (an associative cue) cannot outweigh (issue 15:
scripts/eval_lexical.py). Per-query min-max scaling, which this replaced, gave the best
candidate 1.0 even when nothing stored was related to the query.

Shared words count as far as the memory is about the same thing: the lexical part is multiplied
by a logistic of the cosine around `lexical_gate` (0.15, steep), so a word the query shares with
a turn about something else altogether (cosine near 0) adds nothing, while any turn the dense
model sees as related keeps its lexical evidence whole. With p = 3 this lifted associative cue
recall on the writer-disjoint set (0.175 to 0.263 with the adapter) at a cost of 0.3 points of
LoCoMo R@10, on both halves of a split by conversation (scripts/eval_lexical.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True)
class Calibration:
    """The constants of the score, from settings (`score_*`, `hybrid_alpha`)."""

    alpha: float  # weight of the dense part; the lexical part gets 1 - alpha
    dense_center: float  # the cosine that scores 0.5 as dense relevance
    dense_width: float  # cosines this far above the center score 0.73 (one logistic unit)
    lexical_k: float  # the BM25 score that counts as half of full lexical evidence
    lexical_power: float = 1.0  # steepness around it: 1 is s / (s + k); higher discounts weak matches
    lexical_gate: float | None = None  # the cosine at which shared words count half; None: always whole
    lexical_gate_width: float = 0.05


class Fused(NamedTuple):  # a tuple: made ~170 times per search, three times cheaper than a dataclass
    id: str
    score: float
    dense: float  # raw cosine
    sparse: float  # raw BM25 (0 when the lexical retriever did not return the memory)
    dense_relevance: float
    lexical_relevance: float


def logistic(x: float, center: float, width: float) -> float:
    return 1.0 / (1.0 + math.exp(-(x - center) / width))


def dense_relevance(cosine: float, calibration: Calibration) -> float:
    return logistic(cosine, calibration.dense_center, calibration.dense_width)


def lexical_relevance(bm25: float, calibration: Calibration, cosine: float | None = None) -> float:
    """BM25 saturated to [0, 1), and gated by the cosine when one is given and a gate is set."""
    if bm25 <= 0:
        return 0.0
    odds = (bm25 / calibration.lexical_k) ** calibration.lexical_power
    if cosine is None or calibration.lexical_gate is None:
        return odds / (1.0 + odds)
    return logistic(cosine, calibration.lexical_gate, calibration.lexical_gate_width) * odds / (1.0 + odds)


def score_of(id_: str, cosine: float, bm25: float, calibration: Calibration) -> Fused:
    dense, lexical = dense_relevance(cosine, calibration), lexical_relevance(bm25, calibration, cosine)
    alpha = calibration.alpha
    return Fused(id_, alpha * dense + (1 - alpha) * lexical, cosine, bm25, dense, lexical)


def fuse(dense: Mapping[str, float], sparse: Mapping[str, float], calibration: Calibration) -> list[Fused]:
    """Rank the union of both candidate lists, best first. Dense scores must be known for every
    candidate (the caller looks up the missing ones); a candidate the lexical retriever did not
    return has no lexical evidence."""
    ids = dict.fromkeys([*dense, *sparse])
    fused = [score_of(i, dense.get(i, 0.0), sparse.get(i, 0.0), calibration) for i in ids]
    return sorted(fused, key=lambda f: f.score, reverse=True)
