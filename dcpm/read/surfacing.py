"""Graph surfacing on the read path (DCPM 2.4): schema, intention and core-schema nodes whose
evidence contains a hit, found by index lookups only (no LLM, no traversal beyond one hop).
Only active nodes surface: one that lost evidence to a hard delete may still say what the deleted
memory said, so it stays hidden until consolidation re-induces or removes it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from sqlalchemy import select

from dcpm.api.models import NodeHit
from dcpm.domain import NodeStatus
from dcpm.store.consent import consent_of, visible_kinds
from dcpm.store.db import Database
from dcpm.store.models import Evidence, Node


def surface_nodes(db: Database, user_id: str, hit_item_ids: Sequence[str]) -> list[NodeHit]:
    """Nodes supported by any hit, in the order of their best-ranked supporting hit; layers the
    user switched off are never shown."""
    if not hit_item_ids:
        return []
    rank = {item_id: n for n, item_id in enumerate(hit_item_ids)}
    with db.session() as session:
        kinds = visible_kinds(consent_of(session, user_id))
        if not kinds:
            return []
        rows = session.execute(
            select(Node, Evidence.item_id).join(Evidence, Evidence.node_id == Node.id)
            .where(Node.user_id == user_id, Node.kind.in_(kinds), Node.status == NodeStatus.ACTIVE,
                   Evidence.item_id.in_(list(rank)))).all()
        matched: dict[str, list[str]] = defaultdict(list)
        nodes: dict[str, Node] = {}
        for node, item_id in rows:
            nodes[node.id] = node
            matched[node.id].append(item_id)
        counts = defaultdict(int)
        for node_id, _ in session.execute(select(Evidence.node_id, Evidence.item_id)
                                          .where(Evidence.node_id.in_(list(nodes)))):
            counts[node_id] += 1
    ordered = sorted(nodes.values(), key=lambda n: (min(rank[i] for i in matched[n.id]), n.kind))
    return [NodeHit(id=n.id, kind=n.kind, domain=n.domain, text=n.text, evidence_count=counts[n.id],
                    matched_evidence=sorted(matched[n.id], key=rank.get),
                    reason=f"evidence includes hit #{min(rank[i] for i in matched[n.id]) + 1}")
            for n in ordered]
