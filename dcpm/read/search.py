"""The read path (DCPM 2.4): hybrid ANN, chain traversal, rendered context. Never an LLM."""

from __future__ import annotations

import time
from collections import defaultdict
from datetime import datetime

from sqlalchemy import select

from dcpm.api.models import SearchHit, SearchRequest, SearchResponse
from dcpm.config import Settings
from dcpm.domain import ITEM_KINDS, ItemKind, as_utc
from dcpm.errors import Invalid, NotFound
from dcpm.index import Scope, VectorIndex
from dcpm.index.base import DENSE, SPARSE
from dcpm.inspection import chain_links
from dcpm.read.context_block import render_context
from dcpm.read.fusion import Fused, fuse
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


def retrieve(index: VectorIndex, query: QueryVector, scope: Scope, pool: int, alpha: float) -> list[Fused]:
    """Dense and sparse candidates of one user, fused. Sparse-only candidates get their true
    dense score from their stored vector, so fusion never guesses."""
    dense_hits = {h.id: h.score for h in index.query(DENSE, query.dense, scope, pool)}
    sparse_hits = {h.id: h.score for h in index.query(SPARSE, query.sparse, scope, pool)} if alpha < 1 else {}
    missing = [i for i in sparse_hits if i not in dense_hits]
    for point_id, vector in index.dense_vectors(missing).items():
        dense_hits[point_id] = float(vector @ query.dense)
    return fuse(dense_hits, sparse_hits, alpha)


def search(db: Database, index: VectorIndex, encoder: QueryEncoder, settings: Settings,
           request: SearchRequest) -> SearchResponse:
    started = time.perf_counter()
    check_search(request, settings)
    with db.session() as session:
        if session.get(User, request.user_id) is None:
            raise NotFound(f"unknown user {request.user_id!r}: nothing has been stored for this user")
    as_of = as_utc(request.as_of) if request.as_of else None
    scope = Scope(user_id=request.user_id, kinds=tuple(request.kinds), session_id=request.session_id,
                  as_of=as_of.timestamp() if as_of else None)
    query = encoder.encode_query(request.query)
    pool = max(settings.candidate_pool, request.limit)
    ranked = retrieve(index, query, scope, pool, settings.hybrid_alpha)[: request.limit]
    hits = hydrate(db, ranked, request.user_id, as_of)
    nodes = surface_nodes(db, request.user_id, [h.id for h in hits])  # ranks count every hit
    budget = settings.context_token_budget if request.context_tokens is None else request.context_tokens
    return SearchResponse(user_id=request.user_id, query=request.query, hits=hits, nodes=nodes,
                          context=render_context(hits, budget, nodes), encoder=query.encoder,
                          took_ms=round((time.perf_counter() - started) * 1000, 2))


def hydrate(db: Database, ranked: list[Fused], user_id: str, as_of: datetime | None) -> list[SearchHit]:
    """Rows for the ranked ids (re-checked against the user: the store is the last word) plus
    each item's whole chain, walked once per chain."""
    ids = [f.id for f in ranked]
    with db.session() as session:
        raws = {r.id: r for r in session.scalars(select(RawInput).where(RawInput.id.in_(ids),
                                                                         RawInput.user_id == user_id))}
        items = {i.id: i for i in session.scalars(select(Item).where(Item.id.in_(ids), Item.user_id == user_id))}
        chain_ids = {i.chain_id for i in items.values() if i.kind in ITEM_KINDS}
        members: dict[str, list[Item]] = defaultdict(list)
        if chain_ids:
            for member in session.scalars(select(Item).where(Item.chain_id.in_(chain_ids))):
                members[member.chain_id].append(member)
    chains = {chain_id: walk_chain(nodes) for chain_id, nodes in members.items()}
    hits = []
    for fused in ranked:
        common = dict(id=fused.id, score=round(fused.score, 6), dense_score=round(fused.dense, 6),
                      sparse_score=round(fused.sparse, 6))
        if fused.id in raws:
            raw = raws[fused.id]
            hits.append(SearchHit(**common, kind=ItemKind.RAW, text=raw.text, timestamp=raw.timestamp,
                                  created_at=raw.created_at, session_id=raw.session_id, role=raw.role,
                                  speaker=raw.speaker, metadata=raw.meta or {}))
        elif fused.id in items:
            item = items[fused.id]
            links = chain_links(chains.get(item.chain_id, [item]), as_of)
            holding = next((link for link in links if link.current), None)
            hits.append(SearchHit(**common, kind=item.kind, text=item.text, timestamp=item.valid_from,
                                  created_at=item.created_at, session_id=(item.meta or {}).get("session_id"),
                                  topic=item.topic, metadata=item.meta or {}, chain=links,
                                  current=holding if holding and holding.id != item.id else None))
    return hits
