"""Rows for the ranked ids (DCPM 2.4 step 3): each hit's row, its item's whole chain and the turn
it came from, in two queries whose cost depends on the hits, not on how much the user stored.

Every lookup goes by primary key or by chain, and the owner is checked here, in Python: a
`user_id = ?` condition beside `id IN (...)` lets SQLite choose the per-user index and read every
row of the user (what made the read path grow with the store; issue 15)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Container, Sequence
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from dcpm.api.models import Provenance, SearchHit
from dcpm.domain import ItemKind
from dcpm.inspection import chain_links
from dcpm.read.fusion import Fused
from dcpm.read.grouping import Grouped
from dcpm.store.chains import walk_chain
from dcpm.store.models import Item, RawInput


def item_sources(session: Session, user_id: str, candidate_ids: Sequence[str]) -> dict[str, str | None]:
    """{item id: its source turn's id, or None} for the candidates that are the user's items;
    any other candidate is a turn (or not the user's)."""
    if not candidate_ids:
        return {}
    rows = session.execute(select(Item.id, Item.user_id, Item.source_raw_id).where(Item.id.in_(candidate_ids)))
    return {item_id: raw_id for item_id, owner, raw_id in rows if owner == user_id}


def hydrate(session: Session, ranked: list[Grouped], user_id: str, as_of: datetime | None,
            item_ids: Container[str] | None = None) -> list[SearchHit]:
    """The hits, in order, re-checked against the user (the store is the last word): one query
    for the items with every member of their chains, one for the turns (hits and sources).
    `item_ids`, when known (item_sources), spares the first query when no hit is an item."""
    ids = [g.id for g in ranked]
    if not ids:
        return []
    wanted = set(ids)
    members: dict[str, list[Item]] = defaultdict(list)
    items: dict[str, Item] = {}
    if item_ids is None or any(i in item_ids for i in ids):
        hit_chains = select(Item.chain_id).where(Item.id.in_(ids)).scalar_subquery()
        for member in session.scalars(select(Item).where(Item.chain_id.in_(hit_chains))):
            members[member.chain_id].append(member)
            if member.id in wanted and member.user_id == user_id:
                items[member.id] = member
    raw_ids = set(ids) | {i.source_raw_id for i in items.values() if i.source_raw_id}
    raws = {r.id: r for r in session.scalars(select(RawInput).where(RawInput.id.in_(raw_ids)))
            if r.user_id == user_id}
    chains = {chain_id: walk_chain(nodes) for chain_id, nodes in members.items()}
    hits = []
    for grouped in ranked:
        best = grouped.best
        common = {"id": grouped.id, "score": round(best.score, 6), "dense_score": round(best.dense, 6),
                  "sparse_score": round(best.sparse, 6), "dense_relevance": round(best.dense_relevance, 6),
                  "lexical_relevance": round(best.lexical_relevance, 6)}
        if grouped.id in items:
            item = items[grouped.id]
            links = chain_links(chains.get(item.chain_id, [item]), as_of)
            holding = next((link for link in links if link.current), None)
            source = raws.get(item.source_raw_id) if item.source_raw_id else None
            hits.append(SearchHit(**common, kind=item.kind, text=item.text, timestamp=item.valid_from,
                                  created_at=item.created_at, session_id=(item.meta or {}).get("session_id"),
                                  topic=item.topic, metadata=item.meta or {}, chain=links,
                                  current=holding if holding and holding.id != item.id else None,
                                  source=provenance(source, grouped.source) if source else None))
        elif grouped.id in raws:
            raw = raws[grouped.id]
            hits.append(SearchHit(**common, kind=ItemKind.RAW, text=raw.text, timestamp=raw.timestamp,
                                  created_at=raw.created_at, session_id=raw.session_id, role=raw.role,
                                  speaker=raw.speaker, metadata=raw.meta or {}))
    return hits


def provenance(raw: RawInput, candidate: Fused | None) -> Provenance:
    return Provenance(id=raw.id, text=raw.text, timestamp=raw.timestamp, speaker=raw.speaker, role=raw.role,
                      session_id=raw.session_id, score=round(candidate.score, 6) if candidate else None)
