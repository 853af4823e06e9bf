"""Phase 3 (DCPM 2.3): the cross-domain sweep. Schemas from different domains that behave
alike (cos of behavioural descriptions >= 0.72) but mean different things (cos of their texts
<= 0.40) collide; each connected group of collisions becomes one core schema. Only active
schemas take part, and a schema deleted during an LLM call is skipped, not written to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import networkx as nx
import numpy as np
from sqlalchemy import select, update

from dcpm.admin.delete import fenced, writer_lease
from dcpm.config import Settings
from dcpm.consolidation.graph import add_edge, add_evidence, create_node, evidence_of, members_key, text_hash
from dcpm.domain import NodeKind, NodeStatus
from dcpm.embedding import Embedder
from dcpm.index import VectorIndex, projection
from dcpm.llm import LLMClient, Usage
from dcpm.llm.prompts import behaviour, core_schema
from dcpm.store.db import Database
from dcpm.store.models import Node


@dataclass
class SweepResult:
    schemas: int = 0
    descriptions_written: int = 0
    collision_groups: int = 0
    core_schemas_created: list[str] = field(default_factory=list)


def collisions(domains: Sequence[str | None], behaviour_vectors: np.ndarray, text_vectors: np.ndarray,
               min_behaviour_cos: float, max_text_cos: float) -> list[list[int]]:
    """Connected groups (indices) of colliding schemas; pure, no I/O."""
    graph = nx.Graph()
    behaviour_cos = behaviour_vectors @ behaviour_vectors.T
    text_cos = text_vectors @ text_vectors.T
    for a in range(len(domains)):
        for b in range(a + 1, len(domains)):
            if (domains[a] or "other") != (domains[b] or "other") and behaviour_cos[a, b] >= min_behaviour_cos \
                    and text_cos[a, b] <= max_text_cos:
                graph.add_edge(a, b)
    return sorted((sorted(group) for group in nx.connected_components(graph)), key=lambda g: g[0])


def describe_schemas(db: Database, llm: LLMClient, user_id: str, usage: Usage) -> list[Node]:
    """Behavioural descriptions, cached on the node until its text changes."""
    written = []
    with db.session() as session:
        stale = [(n.id, n.text, n.domain) for n in session.scalars(select(Node).where(
            Node.user_id == user_id, Node.kind == NodeKind.SCHEMA, Node.status == NodeStatus.ACTIVE))
                 if n.behavior_of != text_hash(n.text)]
    for node_id, text, domain in stale:
        answer = llm.structured(behaviour.SYSTEM, behaviour.render(text, domain), behaviour.BehaviourAnswer,
                                usage, "behaviour")
        with db.session() as session:  # a schema deleted meanwhile matches no row
            changed = session.execute(update(Node).where(Node.id == node_id, Node.text == text).values(
                behavior=answer.description.strip(), behavior_of=text_hash(text))).rowcount
        if changed:
            written.append(node_id)
    return written


def sweep(db: Database, index: VectorIndex, embedder: Embedder, llm: LLMClient, settings: Settings, user_id: str,
          run_id: str, usage: Usage) -> SweepResult:
    result = SweepResult(descriptions_written=len(describe_schemas(db, llm, user_id, usage)))
    with db.session() as session:
        schemas = list(session.scalars(select(Node).where(Node.user_id == user_id, Node.kind == NodeKind.SCHEMA,
                                                          Node.status == NodeStatus.ACTIVE).order_by(Node.created_at)))
    result.schemas = len(schemas)
    if len(schemas) < 2:
        return result
    behaviour_vectors = embedder.encode_documents([s.behavior or s.text for s in schemas]).dense
    text_vectors = embedder.encode_documents([s.text for s in schemas]).dense
    groups = collisions([s.domain for s in schemas], behaviour_vectors, text_vectors,
                        settings.collision_min_behavior_cos, settings.collision_max_semantic_cos)
    result.collision_groups = len(groups)
    for group in groups:
        members = [schemas[n] for n in group]
        node = induce_core_schema(db, index, embedder, llm, settings, user_id, members, run_id, usage)
        if node is not None:
            result.core_schemas_created.append(node.id)
    return result


def induce_core_schema(db: Database, index: VectorIndex, embedder: Embedder, llm: LLMClient, settings: Settings,
                       user_id: str, members: list[Node], run_id: str, usage: Usage) -> Node | None:
    """One LLM call per collision group; a group that already has its core schema is skipped,
    so a repeated or resumed sweep never duplicates one. It is written (and indexed) under the
    user's writer lease, and only if every member is still an active schema with evidence."""
    key = members_key(m.id for m in members)
    with db.session() as session:
        if session.scalar(select(Node.id).where(Node.user_id == user_id, Node.members_key == key)) is not None:
            return None
    answer = llm.structured(core_schema.SYSTEM, core_schema.render([(m.text, m.domain, m.behavior) for m in members]),
                            core_schema.CoreSchemaAnswer, usage, "core_schema")
    with writer_lease(db, settings, user_id) as holder:
        with fenced(db, settings, user_id, holder) as session:
            current = [session.get(Node, m.id) for m in members]
            evidence = {item for items in evidence_of(session, [m.id for m in members]).values() for item in items}
            if not evidence or any(m is None or m.status != NodeStatus.ACTIVE for m in current):
                return None  # a member was deleted or lost evidence during the call
            node = create_node(session, user_id, NodeKind.CORE_SCHEMA, answer.text.strip(), "cross-domain", run_id,
                               members=key)
            add_evidence(session, node, evidence, run_id)
            for member in current:
                add_edge(session, user_id, node, member, "abstracts", run_id)
        projection.index_rows(db, index, embedder, nodes=[node])
    return node
