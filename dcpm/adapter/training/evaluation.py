"""Cue recall on held-out simulated lives: does the trigger bring back its earlier statement?

A held-out later message is ranked against the facts of its own source, as the paper's
training ranks a row against its source's bank (Madeleine 4.4). Two candidate pools:
"heldout" (the held-out facts of the source: no candidate was ever seen in training, like a
memory that holds only the user's own and a few other people's facts) and "all" (plus every
training fact of the source: a stress test in which the gold must beat hundreds of facts the
adapter saw as positives, most of them of the same kind as the gold). Rank = 1 + candidates
scored strictly above the gold (Madeleine B).
"""

from __future__ import annotations

from typing import Callable, Literal, Sequence

import numpy as np

from dcpm.adapter.training.lives import Fact, Life, Row, facts_and_rows

KS = (1, 5, 10, 50)
Vectors = Callable[[Sequence[str]], np.ndarray]
Candidates = Literal["all", "heldout"]


def gold_ranks(queries: np.ndarray, bank: np.ndarray, gold: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """candidates[i, m]: may fact m compete for query i (the gold always does)."""
    scores = queries @ bank.T
    gold_scores = scores[np.arange(len(gold)), gold]
    return 1 + ((scores > gold_scores[:, None]) & candidates).sum(axis=1)


def recall_report(ranks: np.ndarray, ks: Sequence[int] = KS) -> dict[str, float]:
    if len(ranks) == 0:
        return {"n": 0}
    report: dict[str, float] = {"n": int(len(ranks))}
    report.update({f"R@{k}": float((ranks <= k).mean()) for k in ks})
    report["MRR"] = float((1.0 / ranks).mean())
    return report


def seen_in_training(heldout: Sequence[Fact], heldout_bank: np.ndarray, training: Sequence[Fact],
                     training_bank: np.ndarray, max_cos: float) -> np.ndarray:
    """seen[i]: does held-out fact i have a near-twin (cos >= max_cos) among the training facts of
    its source? Common lives repeat (two personas on a CPAP machine), so the adapter may have
    learned a held-out fact's triggers from someone else's; recall on the facts without a twin
    is the stricter measure of generalization."""
    if not len(training):
        return np.zeros(len(heldout), bool)
    same_source = np.array([f.source for f in heldout])[:, None] == np.array([f.source for f in training])[None, :]
    return ((heldout_bank @ training_bank.T >= max_cos) & same_source).any(axis=1)


def cue_set(training: Sequence[Life], heldout: Sequence[Life],
            candidates: Candidates = "all") -> tuple[list[Fact], list[Row]]:
    """The held-out rows and their candidate facts; held-out facts come first so rows index them."""
    facts, rows = facts_and_rows(heldout)
    if candidates == "all":
        facts += facts_and_rows(training)[0]
    return facts, rows


def query_vectors(rows: Sequence[Row], encoders: dict[str, Vectors]) -> dict[str, np.ndarray]:
    """Each encoder's vectors of the rows' queries, in row order: encoded once, then ranked
    against as many candidate pools and row subsets as a report needs."""
    return {name: encode([row.query for row in rows]) for name, encode in encoders.items()}


def evaluate(facts: Sequence[Fact], rows: Sequence[Row], bank: np.ndarray,
             queries: dict[str, np.ndarray]) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
    """report[encoder][source or "all"]["later" | "direct"] = Recall@k and MRR, from each
    encoder's query vectors (`query_vectors`, row order)."""
    sources = np.array([fact.source for fact in facts])
    gold = np.array([row.fact for row in rows], dtype=int)
    row_sources = np.array([row.source for row in rows])
    kinds = np.array([row.kind for row in rows])
    candidates = row_sources[:, None] == sources[None, :]
    report: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for name, vectors in queries.items():
        ranks = gold_ranks(vectors, bank, gold, candidates)
        report[name] = {}
        for source in [*sorted(set(row_sources)), "all"]:
            chosen = np.ones(len(rows), bool) if source == "all" else row_sources == source
            report[name][source] = {kind: recall_report(ranks[chosen & (kinds == kind)])
                                    for kind in ("later", "direct")}
    return report
