"""Hard delete: one memory (an item, optionally with the revisions it superseded, or a raw
turn), one graph node, one session, or everything of a user.

Deleting is the one write that removes rows instead of adding them, so it must leave nothing
dangling: a deleted item's chain neighbours are linked to each other, its revisions and vector
go, the graph loses it as evidence, and the events that described it keep only a tombstone
(`{"deleted": true}`, see dcpm.store.events): the log still shows that something happened,
never what. A node that loses only part of its evidence stays, marked needs_reinduction.

Vectors go before rows: if the process dies in between, the rows are still there and start-up
repair re-indexes them, so the delete simply did not happen and can be retried. The other
order could leave vectors of deleted text that nothing would ever clean up.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, Sequence

from sqlalchemy import delete, or_, select, update
from sqlalchemy.orm import Session

from dcpm.admin.relink import Relink, relink
from dcpm.config import Settings
from dcpm.domain import ItemKind, NodeStatus
from dcpm.errors import NotFound
from dcpm.index import VectorIndex, projection
from dcpm.inspection import owner_of
from dcpm.store import events, leases
from dcpm.store.chains import walk_chain
from dcpm.store.db import Database
from dcpm.store.models import (
    ApiKey,
    ClusterDone,
    Consent,
    ConsolidationRun,
    Edge,
    Evidence,
    Item,
    ItemRevision,
    Node,
    RawInput,
    User,
    utcnow,
)

# Rows a user owns outright, children before parents; edges, revisions and evidence go first by
# their own keys, and events are redacted, not deleted. A new table with a user_id belongs here.
USER_OWNED = (Node, Item, RawInput, Consent, ConsolidationRun, ClusterDone, ApiKey)  # a deleted user's keys go too


@dataclass
class Deletion:
    user_id: str
    deleted: list[str] = field(default_factory=list)  # memory ids removed
    relinked: list[str] = field(default_factory=list)  # chain neighbours now linked to each other
    nodes_deleted: list[str] = field(default_factory=list)  # graph nodes left without evidence
    nodes_reinduce: list[str] = field(default_factory=list)  # nodes that lost part of their evidence, kept
    raw_deleted: list[str] = field(default_factory=list)  # turns the deleted items were extracted from
    raw_kept: list[str] = field(default_factory=list)  # such turns kept: they still feed a kept item


@dataclass
class UserDeletion:
    user_id: str
    raw_inputs: int = 0
    items: int = 0
    nodes: int = 0
    events_redacted: int = 0


@contextmanager
def writer_lease(db: Database, settings: Settings, user_id: str) -> Iterator[None]:
    """The lease System 1 holds while it writes for this user: deletes and edits wait for it."""
    with leases.held(db, f"write:{user_id}", settings.writer_lease_seconds, settings.writer_lease_seconds):
        yield


def delete_memory(db: Database, index: VectorIndex, settings: Settings, memory_id: str, *,
                  with_predecessors: bool = False) -> Deletion:
    """Hard-delete one memory. For an item, `with_predecessors` also deletes the older revisions
    it superseded, so that they do not resurface as the current belief; without it the previous
    revision becomes the chain's head again."""
    user_id = owner_of(db, memory_id)
    result = Deletion(user_id=user_id)
    with writer_lease(db, settings, user_id), db.session() as session:
        raw = session.get(RawInput, memory_id)
        if raw is not None:
            index.delete([raw.id])
            _drop_raw(session, raw)
            result.deleted = [raw.id]
            relinked: list[Item] = []
        else:
            item = session.get(Item, memory_id)
            if item is None:  # deleted by someone else while we waited for the lease
                raise NotFound(f"no memory with id {memory_id}")
            chain = walk_chain(list(session.scalars(select(Item).where(Item.chain_id == item.chain_id))))
            position = next(n for n, node in enumerate(chain) if node.id == item.id)
            victims = chain[: position + 1] if with_predecessors else [item]
            relinked = _delete_items(session, index, victims, result)
    _after_delete(db, index, relinked)
    return result


def _delete_items(session: Session, index: VectorIndex, victims: Sequence[Item], result: Deletion) -> list[Item]:
    """Items (of any chains) with their revisions, vectors, evidence, orphaned nodes and the raw
    turns they came from; returns the surviving neighbours whose pointers changed."""
    victim_ids = {v.id for v in victims}
    changes: list[Relink] = []
    for chain_id in {v.chain_id for v in victims}:
        chain = walk_chain(list(session.scalars(select(Item).where(Item.chain_id == chain_id))))
        changes += relink(chain, victim_ids)
    orphans = _nodes_only_supported_by(session, victim_ids)
    sources = _source_turns(session, victims)
    index.delete(sorted(victim_ids) + orphans)
    _apply_relinks(session, victims, changes)
    result.nodes_reinduce = _drop_items(session, victims)
    _drop_nodes(session, orphans)
    events.redact(session, orphans)  # no text of theirs stays in the log; `nodes_deleted` reports them
    result.nodes_reinduce = sorted(set(result.nodes_reinduce) - set(orphans))
    for raws in sources:
        fed = session.scalar(select(Item.id).where(Item.source_raw_id.in_([r.id for r in raws])).limit(1))
        if fed is not None:  # another item extracted from the same turns is kept
            result.raw_kept += [r.id for r in raws]
            continue
        index.delete([r.id for r in raws])
        for raw in raws:
            _drop_raw(session, raw)
        result.raw_deleted += [r.id for r in raws]
    result.deleted += sorted(victim_ids)
    result.relinked += [c.id for c in changes]
    result.nodes_deleted += orphans
    return [session.get(Item, c.id) for c in changes]


def _source_turns(session: Session, victims: Sequence[Item]) -> list[list[RawInput]]:
    """The turns of each add_memory request a victim was extracted from (grouped by request)."""
    raw_ids = {v.source_raw_id for v in victims if v.source_raw_id}
    requests = set(session.scalars(select(RawInput.request_id).where(RawInput.id.in_(raw_ids))))
    grouped: dict[str, list[RawInput]] = {}
    for raw in session.scalars(select(RawInput).where(RawInput.request_id.in_(requests))):
        grouped.setdefault(raw.request_id, []).append(raw)
    return list(grouped.values())


def _after_delete(db: Database, index: VectorIndex, relinked: Sequence[Item]) -> None:
    """After the commit: survivors' payloads mirror their rows, and the store is scrubbed so the
    deleted text survives in no free page and no write-ahead log."""
    for survivor in relinked:
        index.set_payload([survivor.id], projection.validity_payload(survivor))
    db.scrub()


def delete_node(db: Database, index: VectorIndex, node_id: str) -> Deletion:
    """A schema, intention or core schema with its edges and evidence links; the facts stay."""
    with db.session() as session:
        node = session.get(Node, node_id)
        if node is None:
            raise NotFound(f"no graph node with id {node_id}")
        result = Deletion(user_id=node.user_id, nodes_deleted=[node_id])
        index.delete([node_id])
        _drop_nodes(session, [node_id])
        events.tombstone(session, user_id=node.user_id, subject_kind=node.kind, subject_ids=[node_id])
    db.scrub()
    return result


def delete_session(db: Database, index: VectorIndex, settings: Settings, user_id: str, session_id: str) -> Deletion:
    """Every turn of one session and every item extracted from them."""
    result = Deletion(user_id=user_id)
    with writer_lease(db, settings, user_id), db.session() as session:
        raws = list(session.scalars(select(RawInput).where(RawInput.user_id == user_id,
                                                           RawInput.session_id == session_id)))
        if not raws:
            raise NotFound(f"user {user_id!r} has no session {session_id!r}")
        victims = list(session.scalars(select(Item).where(Item.source_raw_id.in_([r.id for r in raws]))))
        relinked = _delete_items(session, index, victims, result) if victims else []
        gone = set(result.raw_deleted)
        remaining = [r for r in raws if r.id not in gone]
        index.delete([r.id for r in remaining])
        for raw in remaining:
            _drop_raw(session, raw)
        result.raw_deleted += [r.id for r in remaining]
    _after_delete(db, index, relinked)
    return result


def _drop_raw(session: Session, raw: RawInput) -> None:
    """A turn goes; facts extracted from it stay (they are beliefs of their own) but lose the link."""
    session.execute(update(Item).where(Item.source_raw_id == raw.id).values(source_raw_id=None))
    events.tombstone(session, user_id=raw.user_id, subject_kind=ItemKind.RAW, subject_ids=[raw.id])
    session.delete(raw)


def _apply_relinks(session: Session, victims: Sequence[Item], changes: Sequence[Relink]) -> None:
    for victim in victims:
        victim.supersedes_id = victim.superseded_by_id = None
    now = utcnow()
    for change in changes:
        survivor = session.get(Item, change.id)
        survivor.supersedes_id, survivor.superseded_by_id = change.supersedes_id, change.superseded_by_id
        survivor.valid_to, survivor.updated_at = change.valid_to, now
    session.flush()  # nothing points at a victim any more


def _drop_items(session: Session, victims: Sequence[Item]) -> list[str]:
    ids = [v.id for v in victims]
    session.execute(delete(ItemRevision).where(ItemRevision.item_id.in_(ids)))
    supported = set(session.scalars(select(Evidence.node_id).where(Evidence.item_id.in_(ids))))
    session.execute(delete(Evidence).where(Evidence.item_id.in_(ids)))
    if supported:
        # A node that lost part of its evidence stays, marked: the read path still surfaces it, the
        # sweep (active schemas only) leaves it out, and nothing re-induces it yet.
        session.execute(update(Node).where(Node.id.in_(supported)).values(status=NodeStatus.NEEDS_REINDUCTION))
    for victim in victims:
        events.tombstone(session, user_id=victim.user_id, subject_kind=victim.kind, subject_ids=[victim.id])
    session.execute(delete(Item).where(Item.id.in_(ids)))
    return sorted(supported)


def _nodes_only_supported_by(session: Session, item_ids: set[str]) -> list[str]:
    """Graph nodes whose whole evidence is being deleted: their text came from deleted memories."""
    affected = set(session.scalars(select(Evidence.node_id).where(Evidence.item_id.in_(item_ids))))
    if not affected:
        return []
    evidence: dict[str, set[str]] = {node_id: set() for node_id in affected}
    for node_id, item_id in session.execute(select(Evidence.node_id, Evidence.item_id)
                                            .where(Evidence.node_id.in_(affected))):
        evidence[node_id].add(item_id)
    return sorted(node_id for node_id, items in evidence.items() if items <= item_ids)


def _drop_nodes(session: Session, node_ids: Sequence[str]) -> None:
    if not node_ids:
        return
    session.execute(delete(Edge).where(or_(Edge.source_id.in_(node_ids), Edge.target_id.in_(node_ids))))
    session.execute(delete(Evidence).where(Evidence.node_id.in_(node_ids)))
    session.execute(delete(Node).where(Node.id.in_(node_ids)))


def delete_user(db: Database, index: VectorIndex, settings: Settings, user_id: str) -> UserDeletion:
    """Everything of one user: raw turns, items and their revisions, graph nodes and edges,
    consent and consolidation bookkeeping, every vector, and the user row; the user's events
    keep only tombstones."""
    with db.session() as session:
        if session.get(User, user_id) is None:
            raise NotFound(f"unknown user {user_id!r}: nothing has been stored for this user")
    result = UserDeletion(user_id=user_id)
    with writer_lease(db, settings, user_id), db.session() as session:
        raw_ids = list(session.scalars(select(RawInput.id).where(RawInput.user_id == user_id)))
        item_ids = list(session.scalars(select(Item.id).where(Item.user_id == user_id)))
        node_ids = list(session.scalars(select(Node.id).where(Node.user_id == user_id)))
        index.delete(raw_ids + item_ids + node_ids)
        users_items = select(Item.id).where(Item.user_id == user_id)
        users_nodes = select(Node.id).where(Node.user_id == user_id)
        session.execute(update(Item).where(Item.user_id == user_id)
                        .values(supersedes_id=None, superseded_by_id=None, source_raw_id=None))
        session.execute(delete(ItemRevision).where(ItemRevision.item_id.in_(users_items)))
        session.execute(delete(Evidence).where(or_(Evidence.item_id.in_(users_items),
                                                   Evidence.node_id.in_(users_nodes))))
        session.execute(delete(Edge).where(or_(Edge.user_id == user_id, Edge.source_id.in_(users_nodes),
                                               Edge.target_id.in_(users_nodes))))
        for model in USER_OWNED:
            session.execute(delete(model).where(model.user_id == user_id))
        result.events_redacted = events.redact_user(session, user_id)
        session.execute(delete(User).where(User.id == user_id))
        result.raw_inputs, result.items, result.nodes = len(raw_ids), len(item_ids), len(node_ids)
    db.scrub()
    return result
