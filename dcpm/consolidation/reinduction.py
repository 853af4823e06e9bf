"""Re-induction after hard deletes (DCPM 2.3, run before triage): a node that lost part of its
evidence may still say what the deleted memories said, so every such node goes (vector, edges,
evidence links; its events keep a tombstone) and, when enough evidence is left (at least
`dbscan_min_samples`, the least a cluster may hold), the induction agent sees what is left as
a cluster of its own and writes the regularity again from surviving memories only. Too little
left: the node is just removed, and its facts go back to triage with the other fresh items. A
core schema is never re-induced here; the sweep induces it again if its schemas still collide.
A node without any evidence (older stores could hold one) is removed as well."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import or_, select

from dcpm.admin.delete import writer_transaction
from dcpm.admin.nodes import remove_nodes
from dcpm.consolidation.backends import Backends
from dcpm.consolidation.graph import evidence_of, members_key
from dcpm.consolidation.induction import Induced, induce_cluster
from dcpm.consolidation.triage import make_cluster, with_vectors
from dcpm.domain import NodeKind, NodeStatus
from dcpm.llm import Usage
from dcpm.store.models import Evidence, Item, Node

INDUCED_KINDS = (NodeKind.SCHEMA, NodeKind.INTENTION)


@dataclass
class Reinduced:
    stale: int = 0  # nodes that lost evidence (or have none)
    removed: int = 0  # of them, removed with too little evidence left to induce from
    reinduced: int = 0  # of them, removed and induced again from what was left
    induced: Induced = field(default_factory=Induced)


def stale_nodes(backends: Backends, user_id: str) -> list[str]:
    """Nodes marked needs_reinduction by a delete, and nodes with no evidence at all."""
    no_evidence = ~select(Evidence.node_id).where(Evidence.node_id == Node.id).exists()
    with backends.db.session() as session:
        return list(session.scalars(select(Node.id).where(
            Node.user_id == user_id, or_(Node.status == NodeStatus.NEEDS_REINDUCTION, no_evidence))
            .order_by(Node.created_at)))


def reinduce(backends: Backends, user_id: str, run_id: str, usage: Usage, dry_run: bool = False) -> Reinduced:
    """Remove each stale node under the writer lease, then re-induce from its remaining evidence
    (one LLM call) when there is enough. Removing first means a crash in between leaves nothing
    stale behind: the facts are then fresh for the next triage."""
    result = Reinduced()
    stale = stale_nodes(backends, user_id)
    result.stale = len(stale)
    if dry_run:
        return result
    for node_id in stale:
        with writer_transaction(backends.db, backends.settings, user_id) as session:
            node = session.get(Node, node_id)
            if node is None:  # deleted meanwhile
                continue
            kind, left = node.kind, sorted(evidence_of(session, [node_id]).get(node_id, []))
            remove_nodes(session, backends.index, [node])
        if kind not in INDUCED_KINDS or len(left) < backends.settings.dbscan_min_samples or \
                not _induce_again(backends, user_id, node_id, left, run_id, usage, result.induced):
            result.removed += 1
            continue
        result.reinduced += 1
    return result


def _induce_again(backends: Backends, user_id: str, node_id: str, item_ids: list[str], run_id: str, usage: Usage,
                  induced: Induced) -> bool:
    """The remaining evidence as a cluster for the agent; False if too little of it is stored."""
    with backends.db.session() as session:
        members = list(session.scalars(select(Item).where(Item.id.in_(item_ids), Item.user_id == user_id)
                                       .order_by(Item.created_at)))
    members, vectors = with_vectors(backends.index, members)
    if len(members) < backends.settings.dbscan_min_samples:
        return False
    assert backends.llm is not None
    key = members_key([f"reinduce:{node_id}", *(m.id for m in members)])
    cluster = make_cluster(backends.db, backends.index, backends.settings, user_id, key, members, vectors)
    done = induce_cluster(backends.db, backends.index, backends.embedder, backends.llm, backends.settings,
                          user_id, cluster, run_id, usage)
    induced.created += done.created
    induced.evidence_added += done.evidence_added
    induced.edges += done.edges
    induced.refused += done.refused
    return True
