"""What a hard delete does to the graph G (DCPM 2.3): a node whose whole evidence is deleted
goes with it (its text came from deleted memories); a node that loses only part of its evidence
stays, marked needs_reinduction, hidden from the read path and the sweep until consolidation
re-induces it from what is left or removes it (dcpm.consolidation.reinduction)."""

from __future__ import annotations

from typing import Sequence

from sqlalchemy import delete, or_, select, update
from sqlalchemy.orm import Session

from dcpm.domain import NodeStatus
from dcpm.index import VectorIndex
from dcpm.store import events
from dcpm.store.models import Edge, Evidence, Node


def only_supported_by(session: Session, item_ids: set[str]) -> list[str]:
    """Graph nodes whose whole evidence is being deleted: their text came from deleted memories."""
    affected = set(session.scalars(select(Evidence.node_id).where(Evidence.item_id.in_(item_ids))))
    if not affected:
        return []
    evidence: dict[str, set[str]] = {node_id: set() for node_id in affected}
    for node_id, item_id in session.execute(select(Evidence.node_id, Evidence.item_id)
                                            .where(Evidence.node_id.in_(affected))):
        evidence[node_id].add(item_id)
    return sorted(node_id for node_id, items in evidence.items() if items <= item_ids)


def lose_evidence(session: Session, item_ids: Sequence[str]) -> list[str]:
    """Unlink deleted items from every node they supported; those nodes are marked for
    re-induction (a node left with no evidence at all is for the caller to drop)."""
    supported = set(session.scalars(select(Evidence.node_id).where(Evidence.item_id.in_(item_ids))))
    session.execute(delete(Evidence).where(Evidence.item_id.in_(item_ids)))
    if supported:
        session.execute(update(Node).where(Node.id.in_(supported)).values(status=NodeStatus.NEEDS_REINDUCTION))
    return sorted(supported)


def drop_nodes(session: Session, node_ids: Sequence[str]) -> None:
    """The rows of nodes with their edges and evidence links (no events, no vectors)."""
    if not node_ids:
        return
    session.execute(delete(Edge).where(or_(Edge.source_id.in_(node_ids), Edge.target_id.in_(node_ids))))
    session.execute(delete(Evidence).where(Evidence.node_id.in_(node_ids)))
    session.execute(delete(Node).where(Node.id.in_(node_ids)))


def remove_nodes(session: Session, index: VectorIndex, nodes: Sequence[Node]) -> None:
    """Graph nodes with their vectors, edges and evidence links, in the caller's transaction;
    their events keep only a tombstone (consolidation removes nodes it re-induces this way)."""
    index.delete([n.id for n in nodes])
    drop_nodes(session, [n.id for n in nodes])
    for node in nodes:
        events.tombstone(session, user_id=node.user_id, subject_kind=node.kind, subject_ids=[node.id])
