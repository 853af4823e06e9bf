"""The associative lane (issue 15): the ordinary hybrid ranking (frozen E(q) + lexical) and the
ranking by the associative query vector normalize(E(q) + E_θ(q)) alone, fused by reciprocal
rank (Cormack et al. 2009: score 1 / (k + rank) summed over the lists), so that what the frozen
encoder finds stays found and what only the adapter finds is added.

The rank fusion decides order and membership only. The score a hit reports stays the calibrated
relevance of dcpm.read.fusion, with the cosine of whichever query vector is closer to it, so
`search_threshold` keeps its meaning. Near-equal votes are settled by that relevance: each hit's
votes are nudged by RELEVANCE_NUDGE x its score, so a score 0.05 higher is worth one step near
the top of a list (1 / 61 - 1 / 62 at k = 60); without it a paraphrase's own memory, first in the
hybrid list and third in the lane, lost to one second and first by 1 / 62 - 1 / 63.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dcpm.index import Scope, VectorIndex
from dcpm.index.base import DENSE
from dcpm.read.fusion import Calibration, Fused, score_of
from dcpm.read.query import QueryVector

RELEVANCE_NUDGE = 0.005


def reciprocal_rank(rankings: Sequence[Sequence[str]], k: float, weights: Sequence[float] = (),
                    relevance: Mapping[str, float] | None = None) -> list[str]:
    """Ids of every ranking, best first by the sum of weight / (k + rank), rank counted from 1
    (weights default to 1), each nudged by RELEVANCE_NUDGE x its `relevance` when given; ties keep
    the order in which the ids first appear."""
    fused: dict[str, float] = {}
    for n, ranking in enumerate(rankings):
        weight = weights[n] if n < len(weights) else 1.0
        for rank, id_ in enumerate(ranking, start=1):
            fused[id_] = fused.get(id_, 0.0) + weight / (k + rank)
    if relevance:
        fused = {id_: votes + RELEVANCE_NUDGE * relevance.get(id_, 0.0) for id_, votes in fused.items()}
    return sorted(fused, key=lambda id_: fused[id_], reverse=True)


def with_associative_lane(index: VectorIndex, query: QueryVector, scope: Scope, pool: int, hybrid: list[Fused],
                          calibration: Calibration, k: float, lexical: bool = False,
                          weight: float = 1.0) -> list[Fused]:
    """`hybrid` (the frozen hybrid candidates, best first) fused with the associative query's
    nearest `pool` memories, ranked by cosine, or with `lexical` by the hybrid score of the
    associative vector and the same lexical evidence, that list's votes weighted by `weight`;
    each scored with the better of its two cosines. A query without an associative vector gets
    `hybrid` itself."""
    if query.associative is None:
        return hybrid
    lane = {h.id: h.score for h in index.query(DENSE, query.associative, scope, pool)}
    frozen = {f.id: f for f in hybrid}
    cosine = {i: f.dense for i, f in frozen.items()}
    associative = dict(lane)
    associative.update(index.dense_scores(query.associative, [i for i in frozen if i not in lane]))
    cosine.update(index.dense_scores(query.dense, [i for i in lane if i not in frozen]))
    if lexical:  # the "replace" ranking: the associative cosine with the same BM25, over its own candidates
        bm25 = {i: f.sparse for i, f in frozen.items() if f.sparse > 0}
        scored = [score_of(i, associative.get(i, -1.0), bm25.get(i, 0.0), calibration)
                  for i in dict.fromkeys([*lane, *bm25])]
        ranked_lane = [f.id for f in sorted(scored, key=lambda f: f.score, reverse=True)]
    else:
        ranked_lane = sorted(lane, key=lane.__getitem__, reverse=True)
    fused = {i: score_of(i, max(cosine.get(i, -1.0), associative.get(i, -1.0)),
                         frozen[i].sparse if i in frozen else 0.0, calibration)
             for i in dict.fromkeys([*frozen, *lane])}
    order = reciprocal_rank([list(frozen), ranked_lane], k, (1.0, weight), {i: f.score for i, f in fused.items()})
    return [fused[i] for i in order]
