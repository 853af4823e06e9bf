"""The read path (DCPM 2.4): hybrid ANN, chain traversal, rendered context. Never an LLM."""

from __future__ import annotations

import time
from collections import defaultdict
from datetime import datetime

from sqlalchemy import select

from dcpm.api.models import Provenance, SearchHit, SearchRequest, SearchResponse, metadata_conditions
from dcpm.config import Settings
from dcpm.domain import ITEM_KINDS, ItemKind, as_utc
from dcpm.errors import Invalid, NotFound
from dcpm.index import Scope, VectorIndex
from dcpm.index.base import DENSE, SPARSE
from dcpm.inspection import chain_links
from dcpm.read.context_block import render_context
from dcpm.read.fusion import Calibration, Fused, fuse
from dcpm.read.grouping import Grouped, group
from dcpm.read.query import QueryEncoder, QueryVector
from dcpm.read.surfacing import surface_nodes
from dcpm.store.chains import walk_chain
from dcpm.store.db import Database
from dcpm.store.models import Item, RawInput, User


def check_search(request: SearchRequest, settings: Settings) -> None:
    if len(request.query) > settings.max_query_chars:
        raise Invalid(f"query is {len(request.query)} characters; the limit is {settings.max_query_chars}")
    if request.limit > settings.max_search_limit:
        raise Invalid(f"limit {request.limit} is above the maximum of {settings.max_search_limit}")


def calibration(settings: Settings) -> Calibration:
    return Calibration(alpha=settings.hybrid_alpha, dense_center=settings.score_dense_center,
                       dense_width=settings.score_dense_width, lexical_k=settings.score_lexical_k)


def candidates(index: VectorIndex, query: QueryVector, scope: Scope, pool: int,
               lexical: bool = True) -> tuple[dict[str, float], dict[str, float]]:
    """Dense and sparse candidates of one user: {id: cosine} and {id: BM25}. Sparse-only
    candidates get their true cosine from their stored vector, so fusion never guesses."""
    dense_hits = {h.id: h.score for h in index.query(DENSE, query.dense, scope, pool)}
    sparse_hits = {h.id: h.score for h in index.query(SPARSE, query.sparse, scope, pool)} if lexical else {}
    missing = [i for i in sparse_hits if i not in dense_hits]
    for point_id, vector in index.dense_vectors(missing).items():
        dense_hits[point_id] = float(vector @ query.dense)
    return dense_hits, sparse_hits


def retrieve(index: VectorIndex, query: QueryVector, scope: Scope, pool: int, scoring: Calibration) -> list[Fused]:
    """The candidates, scored and ranked best first."""
    return fuse(*candidates(index, query, scope, pool, lexical=scoring.alpha < 1), scoring)


def item_sources(db: Database, user_id: str, candidate_ids: list[str]) -> dict[str, str]:
    """{item id: its source turn's id} for the candidates that are items extracted from a turn."""
    if not candidate_ids:
        return {}
    with db.session() as session:
        rows = session.execute(select(Item.id, Item.source_raw_id).where(
            Item.id.in_(candidate_ids), Item.user_id == user_id, Item.source_raw_id.is_not(None)))
        return {item_id: raw_id for item_id, raw_id in rows}


def search(db: Database, index: VectorIndex, encoder: QueryEncoder, settings: Settings,
           request: SearchRequest) -> SearchResponse:
    started = time.perf_counter()
    check_search(request, settings)
    with db.session() as session:
        if session.get(User, request.user_id) is None:
            raise NotFound(f"unknown user {request.user_id!r}: nothing has been stored for this user")
    as_of = as_utc(request.as_of) if request.as_of else None
    scope = Scope(user_id=request.user_id, kinds=tuple(request.kinds), session_id=request.session_id,
                  as_of=as_of.timestamp() if as_of else None, filters=metadata_conditions(request.filters))
    query = encoder.encode_query(request.query)
    pool = max(settings.candidate_pool, request.limit)
    scoring = calibration(settings)
    # A threshold sent drops weaker hits; without one every candidate up to `limit` comes back
    # (a keyword query scores low but is still worth listing), and the default only keeps weak
    # hits, and the patterns they support, out of the context block pasted into a prompt.
    threshold = settings.search_threshold if request.threshold is None else request.threshold
    candidates = retrieve(index, query, scope, pool, scoring)
    grouped = group(candidates, item_sources(db, request.user_id, [c.id for c in candidates]))
    floor = 0.0 if request.threshold is None else threshold
    hits = hydrate(db, [g for g in grouped if g.score >= floor][: request.limit], request.user_id, as_of)
    nodes = surface_nodes(db, request.user_id, [h.id for h in hits])  # ranks count every hit
    relevant = [h for h in hits if h.score >= threshold]
    relevant_ids = {h.id for h in relevant}
    supported = [n for n in nodes if relevant_ids.intersection(n.matched_evidence)]
    budget = settings.context_token_budget if request.context_tokens is None else request.context_tokens
    return SearchResponse(user_id=request.user_id, query=request.query, hits=hits, nodes=nodes,
                          context=render_context(relevant, budget, supported), encoder=query.encoder,
                          took_ms=round((time.perf_counter() - started) * 1000, 2), threshold=threshold,
                          dense_weight=scoring.alpha)


def hydrate(db: Database, ranked: list[Grouped], user_id: str, as_of: datetime | None) -> list[SearchHit]:
    """Rows for the ranked ids (re-checked against the user: the store is the last word), each
    item's whole chain, walked once per chain, and the turn each item came from."""
    ids = [g.id for g in ranked]
    with db.session() as session:
        items = {i.id: i for i in session.scalars(select(Item).where(Item.id.in_(ids), Item.user_id == user_id))}
        raw_ids = set(ids) | {i.source_raw_id for i in items.values() if i.source_raw_id}
        raws = {r.id: r for r in session.scalars(select(RawInput).where(RawInput.id.in_(raw_ids),
                                                                         RawInput.user_id == user_id))}
        chain_ids = {i.chain_id for i in items.values() if i.kind in ITEM_KINDS}
        members: dict[str, list[Item]] = defaultdict(list)
        if chain_ids:
            for member in session.scalars(select(Item).where(Item.chain_id.in_(chain_ids))):
                members[member.chain_id].append(member)
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
