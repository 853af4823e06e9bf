"""The decisions of reconciliation (DCPM 2.2 iii) as plain functions over plain data: what
extraction's answer yields, which extracted items are exact duplicates, and which LLM decisions
are allowed to stand."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

from dateutil import parser as dateparser

from dcpm.domain import Op
from dcpm.llm.prompts.extract import ExtractionAnswer
from dcpm.llm.prompts.reconcile import Decision
from dcpm.store.items import ItemContent

log = logging.getLogger("dcpm.reconcile")

# What an UPDATE's merged text may add to the two texts it merges (joining words); a longer one is
# no merge but a model (or an instruction in the user's turn) writing its own text into an item.
MERGE_SLACK_CHARS = 200

Extracted = ItemContent  # what extraction yields: an item's content, not yet placed in time or a chain


@dataclass(frozen=True)
class Candidate:
    handle: str  # what the LLM sees, e.g. "2.1"
    item_id: str
    text: str


@dataclass(frozen=True)
class Planned:
    op: Op  # ADD | UPDATE | SUPERSEDE | NONE
    index: int  # position in the extracted list
    text: str
    target_id: str | None = None
    reason: str = ""


def extracted_items(answer: ExtractionAnswer, reference: datetime, anticipations: bool) -> list[Extracted]:
    """The answer's items with text, their event times read against the turn's time `reference`;
    their anticipations only when they were asked for (Settings.anticipations)."""
    return [Extracted(kind=i.kind, text=i.text.strip(), type=i.type, topic=i.topic, salience=i.salience,
                      event_time=_parse_time(i.event_time, reference),
                      anticipations=tuple(i.anticipations) if anticipations else ())
            for i in answer.items if i.text.strip()]


def _parse_time(value: str | None, reference: datetime) -> datetime | None:
    """The LLM's event time; unreadable ones are dropped (and dcpm.store.items drops the ones
    out of the store's range)."""
    if not value:
        return None
    try:
        return dateparser.parse(value, default=reference.replace(hour=0, minute=0, second=0, microsecond=0))
    except (ValueError, OverflowError):
        return None


def normalize(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s]", "", text.lower())).strip()


def exact_duplicates(extracted: Sequence[Extracted], candidates: Sequence[Sequence[Candidate]]) -> dict[int, Planned]:
    """Items whose normalized text equals an earlier item of this batch or one of their own
    candidates: dropped without asking the LLM."""
    dropped: dict[int, Planned] = {}
    seen: set[tuple[str, str]] = set()
    for index, item in enumerate(extracted):
        key = (item.kind, normalize(item.text))
        match = next((c for c in candidates[index] if normalize(c.text) == key[1]), None)
        if key in seen:
            dropped[index] = Planned(Op.NONE, index, item.text, reason="duplicate within the request")
        elif match is not None:
            dropped[index] = Planned(Op.NONE, index, item.text, target_id=match.item_id, reason="exact duplicate")
        seen.add(key)
    return dropped


def plan(extracted: Sequence[Extracted], candidates: Sequence[Sequence[Candidate]],
         decisions: Sequence[Decision], skip: set[int]) -> list[Planned]:
    """Turn the LLM's decisions into operations, refusing any that point outside the candidates
    shown for that item, or whose merged text is longer than what it merges (each treated as ADD,
    never a collateral supersession or rewrite)."""
    by_item: dict[int, Decision] = {}
    for decision in decisions:
        by_item.setdefault(decision.item - 1, decision)
    claimed: set[str] = set()
    planned = []
    for index, item in enumerate(extracted):
        if index in skip:
            continue
        decision = by_item.get(index)
        if decision is None:
            planned.append(Planned(Op.ADD, index, item.text, reason="no decision returned"))
            continue
        if decision.op == Op.ADD:
            planned.append(Planned(Op.ADD, index, item.text))
            continue
        if decision.op == Op.NONE:
            planned.append(Planned(Op.NONE, index, item.text, reason="already known"))
            continue
        shown = {c.handle: c for c in candidates[index]}
        target = shown.get((decision.target or "").strip().strip("[]"))
        if target is None:
            log.warning("refused %s to %r: not among the candidates of item %d", decision.op, decision.target,
                        index + 1)
            planned.append(Planned(Op.ADD, index, item.text,
                                   reason=f"{decision.op} target {decision.target!r} was not a candidate"))
            continue
        if target.item_id in claimed:
            planned.append(Planned(Op.ADD, index, item.text, reason="target already changed by this request"))
            continue
        text = (decision.text or "").strip() if decision.op == Op.UPDATE else item.text
        if len(text) > len(target.text) + len(item.text) + MERGE_SLACK_CHARS:
            log.warning("refused UPDATE of item %d: its merged text is longer than the texts it merges", index + 1)
            planned.append(Planned(Op.ADD, index, item.text, reason="merged text longer than the texts it merges"))
            continue
        claimed.add(target.item_id)
        planned.append(Planned(Op(decision.op), index, text or item.text, target_id=target.item_id))
    return planned
