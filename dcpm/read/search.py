"""The read path (DCPM 2.4): hybrid ANN, chain traversal, rendered context. Never an LLM.

Its cost depends on `candidate_pool` and `limit`, not on how much the user stored: two ANN
queries (one more over items' anticipations, one more with the associative lane), one scoring of
the lexical-only candidates in the index, and one store session of primary-key and chain
look-ups (dcpm.read.hydration)."""

from __future__ import annotations

import time

from dcpm.api.models import SearchRequest, SearchResponse, metadata_conditions
from dcpm.config import Settings
from dcpm.domain import as_utc, utcnow
from dcpm.errors import Invalid, NotFound
from dcpm.index import Scope, VectorIndex
from dcpm.index.anticipation import ANTICIPATION, ANTICIPATION_TERMS
from dcpm.index.base import DENSE, SPARSE
from dcpm.read.context_block import render_context
from dcpm.read.fusion import Calibration, Fused, fuse
from dcpm.read.grouping import group
from dcpm.read.hydration import hydrate, item_sources
from dcpm.read.lanes import with_associative_lane
from dcpm.read.lexical_scale import lexical_scale
from dcpm.read.query import QueryEncoder, QueryVector
from dcpm.read.surfacing import surface_nodes
from dcpm.read.temporal import in_time_order
from dcpm.store.db import Database
from dcpm.store.models import User

GROUPING_DEPTH = 4  # candidates looked at per hit asked for when folding turns into their items


def check_search(request: SearchRequest, settings: Settings) -> None:
    if len(request.query) > settings.max_query_chars:
        raise Invalid(f"query is {len(request.query)} characters; the limit is {settings.max_query_chars}")
    if request.limit > settings.max_search_limit:
        raise Invalid(f"limit {request.limit} is above the maximum of {settings.max_search_limit}")


def calibration(settings: Settings, lexical_scale: float = 1.0) -> Calibration:
    """The score's constants; `lexical_scale` (dcpm.read.lexical_scale) turns the lexical half
    point, set in units of a rare word's IDF, into BM25 points of the index searched."""
    return Calibration(alpha=settings.hybrid_alpha, dense_center=settings.score_dense_center,
                       dense_width=settings.score_dense_width,
                       lexical_k=settings.score_lexical_k * lexical_scale, lexical_power=settings.score_lexical_power,
                       lexical_gate=settings.score_lexical_gate, lexical_gate_width=settings.score_lexical_gate_width)


def candidates(index: VectorIndex, query: QueryVector, scope: Scope, pool: int, lexical: bool = True,
               anticipations: bool = False, anticipation_terms: float = 1.0,
               ) -> tuple[dict[str, float], dict[str, float]]:
    """Dense and sparse candidates of one user: {id: cosine} and {id: BM25}. Sparse-only
    candidates get their true cosine, computed by the index from their stored vector, so fusion
    never guesses. With `anticipations`, an item's cosine is the better of its own and its
    anticipations' (dcpm.index.anticipation), and so is its BM25, the anticipations' weighted by
    `anticipation_terms`; an item found by those alone is a candidate."""
    dense_hits = {h.id: h.score for h in index.query(DENSE, query.dense, scope, pool)}
    for hit in index.query(ANTICIPATION, query.dense, scope, pool) if anticipations else ():
        dense_hits[hit.id] = max(hit.score, dense_hits.get(hit.id, -1.0))
    sparse_hits = {h.id: h.score for h in index.query(SPARSE, query.sparse, scope, pool)} if lexical else {}
    by_terms = anticipations and lexical and anticipation_terms > 0
    for hit in index.query(ANTICIPATION_TERMS, query.sparse, scope, pool) if by_terms else ():
        sparse_hits[hit.id] = max(hit.score * anticipation_terms, sparse_hits.get(hit.id, 0.0))
    dense_hits.update(index.dense_scores(query.dense, [i for i in sparse_hits if i not in dense_hits]))
    return dense_hits, sparse_hits


def retrieve(index: VectorIndex, query: QueryVector, scope: Scope, pool: int, scoring: Calibration,
             rrf_k: float = 60.0, lane_lexical: bool = False, lane_weight: float = 1.0,
             anticipations: bool = False, anticipation_terms: float = 1.0) -> list[Fused]:
    """The candidates, best first: by score, or by rank fusion when the query has an associative lane."""
    hybrid = fuse(*candidates(index, query, scope, pool, lexical=scoring.alpha < 1, anticipations=anticipations,
                              anticipation_terms=anticipation_terms), scoring)
    return with_associative_lane(index, query, scope, pool, hybrid, scoring, rrf_k, lexical=lane_lexical,
                                 weight=lane_weight)


def search(db: Database, index: VectorIndex, encoder: QueryEncoder, settings: Settings,
           request: SearchRequest) -> SearchResponse:
    started = time.perf_counter()
    check_search(request, settings)
    as_of = as_utc(request.as_of) if request.as_of else None
    scope = Scope(user_id=request.user_id, kinds=tuple(request.kinds), session_id=request.session_id,
                  as_of=as_of.timestamp() if as_of else None, filters=metadata_conditions(request.filters))
    query = encoder.encode_query(request.query)
    pool = max(settings.candidate_pool, request.limit)
    scoring = calibration(settings, lexical_scale(index, request.user_id, settings.score_lexical_weights_unit))
    # A threshold sent drops weaker hits; without one every candidate up to `limit` comes back (a
    # question related to a memory without sharing its words may score just under the threshold
    # and is still worth listing), and the default only keeps weak hits, and the patterns they
    # support, out of the context block pasted into a prompt.
    threshold = settings.search_threshold if request.threshold is None else request.threshold
    ranked = retrieve(index, query, scope, pool, scoring, settings.adapter_rrf_k,
                      lane_lexical=settings.adapter_fusion == "rrf_hybrid", lane_weight=settings.adapter_lane_weight,
                      anticipations=settings.anticipations, anticipation_terms=settings.anticipation_terms_weight)
    floor = 0.0 if request.threshold is None else threshold
    with db.session() as session:
        # Rank fusion has ordered an associative lane already; time reorders only a ranking by score
        timed = None if query.associative is not None else in_time_order(
            session, request.user_id, request.query, as_of or utcnow(), ranked, settings)
        # A memory folds at most two candidates (an item and its turn), so `limit` of them lie in
        # the first 2 x limit; twice that lets an item ranked well below its turn still fold it.
        head = (timed or ranked)[: GROUPING_DEPTH * request.limit]
        sources = item_sources(session, request.user_id, [c.id for c in head])
        grouped = group(head, sources, in_order=query.associative is not None or timed is not None)
        hits = hydrate(session, [g for g in grouped if g.score >= floor][: request.limit], request.user_id, as_of,
                       item_ids=sources)
        if not hits and session.get(User, request.user_id) is None:  # checked last: one query less per search
            raise NotFound(f"unknown user {request.user_id!r}: nothing has been stored for this user")
        # Nodes cite items only; ranks count every hit
        nodes = surface_nodes(session, request.user_id, [h.id for h in hits]) if any(
            h.id in sources for h in hits) else []
    relevant = [h for h in hits if h.score >= threshold]
    relevant_ids = {h.id for h in relevant}
    supported = [n for n in nodes if relevant_ids.intersection(n.matched_evidence)]
    budget = settings.context_token_budget if request.context_tokens is None else request.context_tokens
    return SearchResponse(user_id=request.user_id, query=request.query, hits=hits, nodes=nodes,
                          context=render_context(relevant, budget, supported), encoder=query.encoder,
                          took_ms=round((time.perf_counter() - started) * 1000, 2), threshold=threshold,
                          dense_weight=scoring.alpha)
