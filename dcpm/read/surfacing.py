"""Graph surfacing on the read path (DCPM 2.4): schema, intention and core-schema nodes whose
evidence contains a hit, found by index lookups only (no LLM, no traversal beyond one hop).
Only active nodes surface: one that lost evidence to a hard delete may still say what the deleted
memory said, so it stays hidden until consolidation re-induces or removes it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from dcpm.api.models import NodeHit
from dcpm.domain import NodeStatus
from dcpm.store.consent import consent_of, visible_kinds
from dcpm.store.models import Evidence, Node


def surface_nodes(session: Session, user_id: str, hit_item_ids: Sequence[str]) -> list[NodeHit]:
    """Nodes supported by any hit, in the order of their best-ranked supporting hit; layers the
    user switched off are never shown. Found through the evidence of the hits (by item id), the
    owner, kind and status checked here: a condition on the user's nodes lets SQLite scan them all."""
    if not hit_item_ids:
        return []
    rank = {item_id: n for n, item_id in enumerate(hit_item_ids)}
    rows = session.execute(select(Node, Evidence.item_id).join(Evidence, Evidence.node_id == Node.id)
                           .where(Evidence.item_id.in_(list(rank)))).all()
    kinds = visible_kinds(consent_of(session, user_id)) if rows else ()  # no node, no consent to read
    matched: dict[str, list[str]] = defaultdict(list)
    nodes: dict[str, Node] = {}
    for node, item_id in rows:
        if node.user_id == user_id and node.kind in kinds and node.status == NodeStatus.ACTIVE:
            nodes[node.id] = node
            matched[node.id].append(item_id)
    counts: dict[str, int] = {}
    if nodes:
        per_node = session.execute(select(Evidence.node_id, func.count()).where(Evidence.node_id.in_(list(nodes)))
                                   .group_by(Evidence.node_id))
        counts = {node_id: count for node_id, count in per_node}
    ordered = sorted(nodes.values(), key=lambda n: (min(rank[i] for i in matched[n.id]), n.kind))
    return [NodeHit(id=n.id, kind=n.kind, domain=n.domain, text=n.text, evidence_count=counts.get(n.id, 0),
                    matched_evidence=sorted(matched[n.id], key=rank.get),
                    reason=f"evidence includes hit #{min(rank[i] for i in matched[n.id]) + 1}")
            for n in ordered]
