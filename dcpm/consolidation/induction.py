"""Phase 2 (DCPM 2.3): the induction agent, once per cluster, with four tools whose calls are
validated and applied in emission order, so the graph grows night by night.

The LLM call runs outside any lock; its calls are applied under the user's writer lease, which
hard deletes hold too, so a delete never interleaves with an apply. A fact deleted while the
agent was thinking is left out of the evidence, and a node that would have no evidence at all
is refused: a node's text must rest on stored memories."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable

from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from dcpm.admin.delete import writer_lease
from dcpm.config import Settings
from dcpm.consolidation.graph import add_edge, add_evidence, create_node
from dcpm.consolidation.triage import Cluster
from dcpm.domain import NodeKind, NodeStatus
from dcpm.embedding import Embedder
from dcpm.index import VectorIndex, projection
from dcpm.llm import LLMClient, ToolCall, Usage
from dcpm.llm.prompts import induce
from dcpm.store import leases
from dcpm.store.consent import consent_of
from dcpm.store.db import Database
from dcpm.store.models import ClusterDone, Item, Node

log = logging.getLogger("dcpm.consolidation")
KIND_OF_TOOL = {"create_schema": NodeKind.SCHEMA, "create_intention": NodeKind.INTENTION}
LAYER_OF_KIND = {NodeKind.SCHEMA: "schemas", NodeKind.INTENTION: "intentions"}


@dataclass
class Induced:
    created: list[str] = field(default_factory=list)
    evidence_added: int = 0
    edges: int = 0
    refused: list[str] = field(default_factory=list)


class _Resolver:
    """Maps the handles the agent saw (f1, n1, refs it made) back to ids of this user only; no
    other name is taken, not even the id of another memory of the same user."""

    def __init__(self, session, user_id: str, cluster: Cluster, node_ids: list[str]):  # type: ignore[no-untyped-def]
        self.session, self.user_id = session, user_id
        self.facts = {f"f{n + 1}": item_id for n, item_id in enumerate(cluster.item_ids)}
        self.nodes = {f"n{n + 1}": node_id for n, node_id in enumerate(node_ids)}
        self.refs: dict[str, Node] = {}

    def node(self, handle: str) -> Node:
        handle = handle.strip().strip("[]")
        if handle in self.refs:
            return self.refs[handle]
        node = self.session.get(Node, self.nodes[handle]) if handle in self.nodes else None
        if node is None or node.user_id != self.user_id or node.status != NodeStatus.ACTIVE:
            raise ValueError(f"unknown node {handle!r}")
        return node

    def items(self, handles: list[str]) -> list[str]:
        """The stored facts behind the handles; a fact of the cluster deleted since triage is
        left out, any other handle is refused, an item id too: only what the agent was shown may
        become evidence. Raises unless at least one is left."""
        ids = []
        for handle in handles:
            handle = handle.strip().strip("[]")
            if handle not in self.facts:
                raise ValueError(f"unknown fact {handle!r}")
            item_id = self.facts[handle]
            item = self.session.get(Item, item_id)
            if item is None:
                continue  # deleted while the agent was thinking
            if item.user_id != self.user_id:
                raise ValueError(f"unknown fact {handle!r}")
            ids.append(item_id)
        if not ids:
            raise ValueError("no stored evidence: a node must rest on at least one stored fact")
        return ids


def context_nodes(db: Database, cluster: Cluster) -> list[Node]:
    ids = list(dict.fromkeys(cluster.touching_nodes + cluster.nearest_nodes))
    with db.session() as session:
        found = {n.id: n for n in session.scalars(select(Node).where(Node.id.in_(ids),
                                                                     Node.status == NodeStatus.ACTIVE))}
    return [found[i] for i in ids if i in found]


def induce_cluster(db: Database, index: VectorIndex, embedder: Embedder, llm: LLMClient, settings: Settings,
                   user_id: str, cluster: Cluster, run_id: str, usage: Usage) -> Induced:
    nodes = context_nodes(db, cluster)
    facts = [(f"f{n + 1}", text, topic) for n, (text, topic) in enumerate(zip(cluster.texts, cluster.topics))]
    prompt = induce.render(facts[:settings.consolidation_max_facts_per_call],
                           [(f"n{n + 1}", node.kind, node.text, node.domain) for n, node in enumerate(nodes)])
    calls = llm.tool_calls(induce.SYSTEM, prompt, induce.TOOLS, usage, "induce")
    with writer_lease(db, settings, user_id) as holder:
        return apply_calls(db, index, embedder, user_id, cluster, [n.id for n in nodes], calls, run_id,
                           fence=lambda session: leases.fence(session, f"write:{user_id}", holder,
                                                              settings.writer_lease_seconds))


def apply_calls(db: Database, index: VectorIndex, embedder: Embedder, user_id: str, cluster: Cluster,
                node_ids: list[str], calls: list[ToolCall], run_id: str,
                fence: Callable[[Session], None] = lambda session: None) -> Induced:
    """Validate and apply in emission order, in one transaction together with marking the
    cluster done, so a crash never leaves half a cluster applied. The caller holds the user's
    writer lease, so the new nodes' vectors are written before a delete can remove them."""
    result = Induced()
    created: list[Node] = []
    with db.session() as session:
        fence(session)  # first: a run whose writer lease was taken over writes nothing
        resolve = _Resolver(session, user_id, cluster, node_ids)
        consent = consent_of(session, user_id)
        for call in calls:
            try:
                _apply(session, resolve, consent, call, run_id, result, created)
            except (ValueError, ValidationError) as exc:
                reason = f"{call.name}: {exc}".splitlines()[0]
                log.warning("refused tool call for %s: %s", user_id, reason)
                result.refused.append(reason)
        session.add(ClusterDone(key=cluster.key, user_id=user_id, run_id=run_id))
    if created:
        projection.index_rows(db, index, embedder, nodes=created)
    return result


def _apply(session, resolve: _Resolver, consent, call: ToolCall, run_id: str, result: Induced,  # type: ignore[no-untyped-def]
           created: list[Node]) -> None:
    model = induce.ARGUMENTS.get(call.name)
    if model is None:
        raise ValueError(f"unknown tool {call.name!r}")
    args = model.model_validate(call.arguments)
    if call.name in KIND_OF_TOOL:
        kind = KIND_OF_TOOL[call.name]
        if not getattr(consent, LAYER_OF_KIND[kind]):
            raise ValueError(f"the {kind} layer is switched off for this user")
        evidence = resolve.items(args.evidence)  # refuses a node without stored evidence
        node = create_node(session, resolve.user_id, kind, args.text.strip(), args.domain, run_id)
        result.evidence_added += add_evidence(session, node, evidence, run_id)
        resolve.refs[args.ref] = node
        created.append(node)
        result.created.append(node.id)
    elif call.name == "add_evidence":
        node = resolve.node(args.node)
        result.evidence_added += add_evidence(session, node, resolve.items(args.evidence), run_id)
    else:
        source, target = resolve.node(args.source), resolve.node(args.target)
        if source.id == target.id:
            raise ValueError("an edge needs two different nodes")
        add_edge(session, resolve.user_id, source, target, args.type, run_id)
        result.edges += 1
