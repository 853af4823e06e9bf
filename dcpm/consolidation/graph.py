"""The graph G: nodes, evidence and edges in the relational store, a networkx view per user."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import Iterable, Sequence

import networkx as nx
from sqlalchemy import select
from sqlalchemy.orm import Session

from dcpm.store.models import Edge, Event, Evidence, Node, utcnow

NODE_KINDS = ("schema", "intention", "core_schema")


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def members_key(node_ids: Iterable[str]) -> str:
    return hashlib.sha256(",".join(sorted(node_ids)).encode()).hexdigest()[:32]


def create_node(session: Session, user_id: str, kind: str, text: str, domain: str | None, run_id: str | None,
                members: str | None = None) -> Node:
    node = Node(user_id=user_id, kind=kind, text=text, domain=domain, run_id=run_id, members_key=members)
    session.add(node)
    session.flush()
    session.add(Event(user_id=user_id, action="node_created", subject_kind=kind, subject_id=node.id,
                      request_id=run_id, detail={"text": text, "domain": domain}))
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
        session.add(Event(user_id=node.user_id, action="evidence_added", subject_kind=node.kind,
                          subject_id=node.id, request_id=run_id, detail={"items": new}))
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


def user_graph(session: Session, user_id: str) -> nx.MultiDiGraph:
    """Nodes (with kind, domain, text, evidence) and typed edges of one user, for traversal."""
    graph = nx.MultiDiGraph()
    nodes = list(session.scalars(select(Node).where(Node.user_id == user_id)))
    evidence = evidence_of(session, [n.id for n in nodes])
    for node in nodes:
        graph.add_node(node.id, kind=node.kind, domain=node.domain, text=node.text, status=node.status,
                       evidence=sorted(evidence.get(node.id, [])))
    for edge in session.scalars(select(Edge).where(Edge.user_id == user_id)):
        graph.add_edge(edge.source_id, edge.target_id, type=edge.type)
    return graph
