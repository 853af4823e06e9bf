"""One memory, one hit: a raw turn and the items extracted from it are the same thing to the
reader, so the turn's candidate folds into its best-ranked item, which carries the turn as
provenance. Done over every candidate before the cut to `limit`, so `limit` hits are `limit`
different memories."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dcpm.read.fusion import Fused


@dataclass(frozen=True)
class Grouped:
    """A memory as ranked: `best` is the candidate whose score it carries (the item's own, or its
    source turn's when the turn scored higher); `source` is the folded turn's candidate, if any."""

    id: str
    best: Fused
    source: Fused | None = None

    @property
    def score(self) -> float:
        return self.best.score


def group(ranked: Sequence[Fused], sources: Mapping[str, str], in_order: bool = False) -> list[Grouped]:
    """`sources` maps candidate item ids to their source turn's id. A turn among the candidates is
    dropped when one of its items is too, and lends its score to the best-ranked of them (the
    others keep their own). Candidates rank by score, or as given when `in_order` (a rank fusion
    decided the order); a memory takes the better rank of its item and its turn."""
    if not in_order:
        ranked = sorted(ranked, key=lambda f: f.score, reverse=True)
    position = {f.id: n for n, f in enumerate(ranked)}
    by_id = {f.id: f for f in ranked}
    lender: dict[str, str] = {}  # turn id -> the item it folds into (its best-ranked item)
    for candidate in ranked:
        raw_id = sources.get(candidate.id)
        if raw_id is not None and raw_id in by_id:
            lender.setdefault(raw_id, candidate.id)
    folded_into = {item_id: by_id[raw_id] for raw_id, item_id in lender.items()}
    grouped = []
    for candidate in ranked:
        if candidate.id in lender:
            continue
        turn = folded_into.get(candidate.id)
        best = turn if turn is not None and turn.score > candidate.score else candidate
        grouped.append(Grouped(candidate.id, best, turn))
    if in_order:
        return sorted(grouped, key=lambda g: min(position[g.id], position[g.source.id] if g.source else len(ranked)))
    return sorted(grouped, key=lambda g: g.score, reverse=True)
