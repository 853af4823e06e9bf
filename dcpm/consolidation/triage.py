"""Phase 1 (DCPM 2.3, no LLM): triage the items no node covers yet, cluster them, and gather
each cluster's graph context in both directions. Items deleted while triage runs are left out,
and only active nodes are context (one awaiting re-induction may repeat deleted text)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import select

from dcpm.config import Settings
from dcpm.consolidation.clustering import centroid, two_stage_dbscan
from dcpm.consolidation.graph import members_key
from dcpm.domain import ItemKind, NodeKind, NodeStatus
from dcpm.index import Scope, VectorIndex
from dcpm.index.base import DENSE
from dcpm.store.db import Database
from dcpm.store.models import ClusterDone, Evidence, Item, Node

VECTOR_BATCH = 1024


@dataclass
class Cluster:
    key: str
    item_ids: list[str]
    texts: list[str]
    topics: list[str | None]
    centroid: np.ndarray
    nearest_nodes: list[str] = field(default_factory=list)  # existing schema/intention nodes by centroid
    touching_nodes: list[str] = field(default_factory=list)  # nodes whose evidence shares a chain


@dataclass
class Triage:
    fresh_items: int
    clusters: list[Cluster]
    noise: int
    already_done: int


def fresh_items(db: Database, user_id: str) -> list[Item]:
    """Current facts and identity items that are not yet evidence of any node."""
    with db.session() as session:
        covered = select(Evidence.item_id)
        return list(session.scalars(select(Item).where(
            Item.user_id == user_id, Item.kind.in_((ItemKind.FACT, ItemKind.IDENTITY)), Item.superseded_by_id.is_(None),
            Item.id.not_in(covered)).order_by(Item.created_at)))


def item_vectors(index: VectorIndex, ids: list[str]) -> dict[str, np.ndarray]:
    """The stored dense vectors (the index holds E(m) already; no re-embedding); an item deleted
    meanwhile has none."""
    found: dict[str, np.ndarray] = {}
    for start in range(0, len(ids), VECTOR_BATCH):
        found.update(index.dense_vectors(ids[start:start + VECTOR_BATCH]))
    return found


def with_vectors(index: VectorIndex, items: list[Item]) -> tuple[list[Item], np.ndarray]:
    """The items that still have a vector, and their vectors as rows."""
    found = item_vectors(index, [i.id for i in items])
    kept = [i for i in items if i.id in found]
    return kept, (np.stack([found[i.id] for i in kept]) if kept else np.zeros((0, 1), dtype=np.float32))


def triage(db: Database, index: VectorIndex, settings: Settings, user_id: str) -> Triage:
    items, vectors = with_vectors(index, fresh_items(db, user_id))
    if not items:
        return Triage(0, [], 0, 0)
    groups = two_stage_dbscan(vectors, settings.dbscan_eps_initial, settings.dbscan_eps_refine,
                              settings.dbscan_min_samples, settings.dbscan_max_cluster_size)
    clustered = sum(len(g) for g in groups)
    clusters, skipped = [], 0
    with db.session() as session:
        done = set(session.scalars(select(ClusterDone.key).where(ClusterDone.user_id == user_id)))
    for group in groups:
        members = [items[n] for n in group]
        key = members_key(m.id for m in members)
        if key in done:
            skipped += 1
            continue
        clusters.append(make_cluster(db, index, settings, user_id, key, members, vectors[group]))
    return Triage(len(items), clusters, len(items) - clustered, skipped)


def make_cluster(db: Database, index: VectorIndex, settings: Settings, user_id: str, key: str,
                 members: list[Item], vectors: np.ndarray) -> Cluster:
    """A cluster with its graph context: the nodes nearest its centroid and those touching it."""
    cluster = Cluster(key=key, item_ids=[m.id for m in members], texts=[m.text for m in members],
                      topics=[m.topic for m in members], centroid=centroid(vectors))
    graph = Scope(user_id=user_id, kinds=(NodeKind.SCHEMA, NodeKind.INTENTION))
    cluster.nearest_nodes = [h.id for h in index.query(DENSE, cluster.centroid, graph,
                                                       settings.consolidation_nearest_nodes)]
    cluster.touching_nodes = touching_nodes(db, user_id, members)
    return cluster


def touching_nodes(db: Database, user_id: str, members: list[Item]) -> list[str]:
    """Nodes whose evidence already points into the cluster: here, at earlier revisions of the
    cluster's items (same supersedes chain), since the items themselves are not evidence yet."""
    chains = {m.chain_id for m in members}
    with db.session() as session:
        return list(session.scalars(
            select(Node.id).distinct().join(Evidence, Evidence.node_id == Node.id).join(Item, Item.id == Evidence.item_id)
            .where(Node.user_id == user_id, Node.status == NodeStatus.ACTIVE, Item.chain_id.in_(chains))))
