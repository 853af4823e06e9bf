"""The graph G (DCPM 2.3): schema, intention and core-schema nodes, their evidence and typed edges,
written in the relational store by the induction agent and the sweep."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import Iterable, Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from dcpm.domain import EventAction, NodeKind
from dcpm.store import events
from dcpm.store.models import Edge, Evidence, Node, utcnow


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def members_key(node_ids: Iterable[str]) -> str:
    return hashlib.sha256(",".join(sorted(node_ids)).encode()).hexdigest()[:32]


def create_node(session: Session, user_id: str, kind: NodeKind, text: str, domain: str | None, run_id: str | None,
                members: str | None = None) -> Node:
    node = Node(user_id=user_id, kind=kind, text=text, domain=domain, run_id=run_id, members_key=members)
    session.add(node)
    session.flush()
    events.record(session, EventAction.NODE_CREATED, user_id=user_id, subject_kind=kind, subject_id=node.id,
                  request_id=run_id, text=text, domain=domain)
    return node


def add_evidence(session: Session, node: Node, item_ids: Iterable[str], run_id: str | None) -> int:
    """Attach items to a node; items already attached are skipped. Returns how many were new."""
    wanted = set(item_ids)
    present = set(session.scalars(select(Evidence.item_id).where(Evidence.node_id == node.id,
                                                                 Evidence.item_id.in_(wanted))))
    new = sorted(wanted - present)
    session.add_all(Evidence(node_id=node.id, item_id=item_id, run_id=run_id) for item_id in new)
    if new:
        node.updated_at = utcnow()
        events.record(session, EventAction.EVIDENCE_ADDED, user_id=node.user_id, subject_kind=node.kind,
                      subject_id=node.id, request_id=run_id, items=new)
    return len(new)


def add_edge(session: Session, user_id: str, source: Node, target: Node, edge_type: str, run_id: str | None) -> Edge:
    existing = session.scalar(select(Edge).where(Edge.source_id == source.id, Edge.target_id == target.id,
                                                 Edge.type == edge_type))
    if existing is not None:
        return existing
    edge = Edge(user_id=user_id, source_id=source.id, target_id=target.id, type=edge_type, run_id=run_id)
    session.add(edge)
    return edge


def evidence_of(session: Session, node_ids: Sequence[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = defaultdict(list)
    for node_id, item_id in session.execute(select(Evidence.node_id, Evidence.item_id)
                                            .where(Evidence.node_id.in_(node_ids))):
        found[node_id].append(item_id)
    return found
