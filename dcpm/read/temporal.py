"""Time in the read path (AssoMem's temporal alignment, the LLM-free part): a query that names a
past time ("what did I cook last weekend", "in May 2023") or asks "when" has the head of its
candidates reordered by `(1 - w) * relevance + w * signal` (dcpm.read.signals). Scores stay the
calibrated relevance, so the threshold keeps its meaning; only the order moves. Any other query
costs one regular-expression test and no look-up. Measured by scripts/eval_signals.py."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from dcpm.config import Settings
from dcpm.read import signals
from dcpm.read.fusion import Fused
from dcpm.store.models import Item, RawInput


def times_and_texts(session: Session, user_id: str, ids: Sequence[str]) -> tuple[list, list[str]]:
    """When each candidate happened (a turn's timestamp, an item's valid_from) and its text, by
    primary key; the owner checked here, as hydration does. Unknown ids get (None, "")."""
    found: dict[str, tuple[datetime | None, str]] = {}
    for row in session.execute(select(RawInput.id, RawInput.user_id, RawInput.timestamp, RawInput.text)
                               .where(RawInput.id.in_(ids))):
        if row.user_id == user_id:
            found[row.id] = (row.timestamp, row.text)
    missing = [i for i in ids if i not in found]
    if missing:
        for row in session.execute(select(Item.id, Item.user_id, Item.valid_from, Item.text)
                                   .where(Item.id.in_(missing))):
            if row.user_id == user_id:
                found[row.id] = (row.valid_from, row.text)
    pairs = [found.get(i, (None, "")) for i in ids]
    return [when for when, _ in pairs], [text for _, text in pairs]


def in_time_order(session: Session, user_id: str, query: str, now: datetime, ranked: list[Fused],
                  settings: Settings) -> list[Fused] | None:
    """The candidates with their head reordered by the time the query names; None when the query
    names no time (or the signal is off), so the caller keeps its order and sorting."""
    if settings.temporal_weight <= 0 or not ranked or not signals.names_time(query, now):
        return None
    head, tail = ranked[: settings.temporal_rerank_depth], ranked[settings.temporal_rerank_depth:]
    when, texts = times_and_texts(session, user_id, [c.id for c in head])
    signal = signals.time_signal(query, now, when, texts, settings.temporal_tolerance_days)
    order = signals.reranked([c.score for c in head], signal, settings.temporal_weight)
    return [head[i] for i in order] + tail
