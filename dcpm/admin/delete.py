"""Hard delete: one memory (an item, optionally with the revisions it superseded, or a raw
turn), an item's whole chain, one graph node, one session, or everything of a user.

Deleting is the one write that removes rows instead of adding them, so it must leave nothing
dangling: a deleted item's chain neighbours are linked to each other, its revisions and vector
go, the graph loses it as evidence, and the events that described it keep only a tombstone
(`{"deleted": true}`, see dcpm.store.events): the log still shows that something happened,
never what. A node that loses only part of its evidence stays, marked needs_reinduction: the
read path no longer surfaces it, and the next consolidation re-induces or removes it.

Vectors go before rows: if the process dies in between, the rows are still there and start-up
repair re-indexes them, so the delete simply did not happen and can be retried. The other
order could leave vectors of deleted text that nothing would ever clean up. The vector shard
still holds the deleted points' bytes until it is compacted (`VectorIndex.compact`): the
daemon's index upkeep does that once writes are quiet, `compact=True` does it before the
delete returns, and closing the index does it for a process that ends.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

from sqlalchemy import delete, or_, select, update
from sqlalchemy.orm import Session

from dcpm.admin import nodes
from dcpm.admin.relink import Relink, relink
from dcpm.config import Settings
from dcpm.domain import ItemKind
from dcpm.errors import Invalid, NotFound
from dcpm.index import VectorIndex, projection
from dcpm.inspection import find_memory, node_owner, owner_of
from dcpm.store import events, items, leases
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

log = logging.getLogger("dcpm.admin.delete")

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
    raw_deleted: list[str] = field(default_factory=list)  # source turns of the deleted items (and deleted turns)
    raw_kept: list[str] = field(default_factory=list)  # source turns kept: they still feed a kept item
    came_back: int = 0  # rows restored under deleted ids while the delete ended: they need indexing again


@dataclass
class UserDeletion:
    user_id: str
    raw_inputs: int = 0
    items: int = 0
    nodes: int = 0
    events_redacted: int = 0
    came_back: int = 0  # as Deletion.came_back


@contextmanager
def writer_lease(db: Database, settings: Settings, user_id: str) -> Iterator[str]:
    """The lease System 1 holds while it writes for this user: deletes, edits and consolidation's
    writes wait for it. Yields the holder, for `fenced`."""
    with leases.held(db, f"write:{user_id}", settings.writer_lease_seconds, settings.writer_lease_seconds) as holder:
        yield holder


@contextmanager
def fenced(db: Database, settings: Settings, user_id: str, holder: str) -> Iterator[Session]:
    """A transaction whose first statement checks that `holder` still holds the user's writer
    lease (renewing it): a holder that lost the lease meanwhile writes nothing (LeaseLost)."""
    with db.session() as session:
        leases.fence(session, f"write:{user_id}", holder, settings.writer_lease_seconds)
        yield session


@contextmanager
def writer_transaction(db: Database, settings: Settings, user_id: str) -> Iterator[Session]:
    """The user's writer lease and one fenced transaction under it."""
    with writer_lease(db, settings, user_id) as holder, fenced(db, settings, user_id, holder) as session:
        yield session


def delete_memory(db: Database, index: VectorIndex, settings: Settings, memory_id: str, *,
                  with_predecessors: bool = False, compact: bool = False) -> Deletion:
    """Hard-delete one memory. For an item, `with_predecessors` also deletes the older revisions
    it superseded, so that they do not resurface as the current belief; without it the previous
    revision becomes the chain's head again. `compact` purges the vector shard before returning."""
    def victims(session: Session, item: Item) -> list[Item]:
        chain = walk_chain(list(session.scalars(select(Item).where(Item.chain_id == item.chain_id))))
        position = next(n for n, node in enumerate(chain) if node.id == item.id)
        return chain[: position + 1] if with_predecessors else [item]

    return _delete_by_id(db, index, settings, memory_id, victims, compact, raw_allowed=True)


def delete_chain(db: Database, index: VectorIndex, settings: Settings, memory_id: str, *,
                 compact: bool = False) -> Deletion:
    """Every revision of the belief an item belongs to. The chain is resolved by its chain_id
    under the writer lease, so a revision System 1 wrote while the delete waited goes too."""
    def victims(session: Session, item: Item) -> list[Item]:
        return list(session.scalars(select(Item).where(Item.chain_id == item.chain_id)))

    return _delete_by_id(db, index, settings, memory_id, victims, compact, raw_allowed=False)


def _delete_by_id(db: Database, index: VectorIndex, settings: Settings, memory_id: str,
                  victims: Callable[[Session, Item], list[Item]], compact: bool, *, raw_allowed: bool) -> Deletion:
    """Look the memory up again under the user's writer lease (it may have changed or gone while
    the delete waited), then delete a raw turn, or the items `victims` picks."""
    user_id = owner_of(db, memory_id)
    result = Deletion(user_id=user_id)
    relinked: list[Item] = []
    with writer_transaction(db, settings, user_id) as session:
        found = find_memory(session, memory_id)
        if found is None:  # deleted by someone else while we waited for the lease
            raise NotFound(f"no memory with id {memory_id}")
        if isinstance(found, RawInput):
            if not raw_allowed:
                raise Invalid(f"{memory_id} is a raw turn; only items belong to chains")
            index.delete([found.id])
            _drop_raws(session, user_id, [found])
            result.deleted = [found.id]
        else:
            relinked = _delete_items(session, index, victims(session, found), result)
    result.came_back = _after_delete(db, index, relinked, result.deleted + result.raw_deleted + result.nodes_deleted,
                                     compact)
    return result


def _delete_items(session: Session, index: VectorIndex, victims: Sequence[Item], result: Deletion) -> list[Item]:
    """Items (of any chains) with their revisions, vectors, evidence, orphaned nodes and their
    own source turns; returns the surviving neighbours whose pointers changed.

    A victim's source turn (`source_raw_id`, the turn it was extracted from) goes with it once
    no kept item points at that turn. The other turns of the same add_memory request stay: they
    may have produced nothing or other memories, and a whole conversation must not vanish with
    one fact; delete them by id or by session."""
    victim_ids = {v.id for v in victims}
    changes: list[Relink] = []
    for chain_id in {v.chain_id for v in victims}:
        chain = walk_chain(list(session.scalars(select(Item).where(Item.chain_id == chain_id))))
        changes += relink(chain, victim_ids)
    orphans = nodes.only_supported_by(session, victim_ids)
    sources = list(session.scalars(select(RawInput).where(
        RawInput.id.in_({v.source_raw_id for v in victims if v.source_raw_id}))))
    index.delete(sorted(victim_ids) + orphans)
    _apply_relinks(session, victims, changes)
    reinduce = _drop_items(session, victims)
    nodes.drop_nodes(session, orphans)
    events.redact(session, orphans)  # no text of theirs stays in the log; `nodes_deleted` reports them
    result.nodes_reinduce = sorted(set(reinduce) - set(orphans))
    kept = set(session.scalars(select(Item.source_raw_id).where(Item.source_raw_id.in_([r.id for r in sources]))))
    result.raw_kept += [r.id for r in sources if r.id in kept]  # another item drawn from the turn is kept
    dropped = [r for r in sources if r.id not in kept]
    index.delete([r.id for r in dropped])
    _drop_raws(session, result.user_id, dropped)
    result.raw_deleted += [r.id for r in dropped]
    result.deleted += sorted(victim_ids)
    result.relinked += [c.id for c in changes]
    result.nodes_deleted += orphans
    return [session.get(Item, c.id) for c in changes]


def _after_delete(db: Database, index: VectorIndex, relinked: Sequence[Item], gone: Sequence[str],
                  compact: bool = False) -> int:
    """After the commit: the deleted ids leave the index once more (an index writer that read their
    rows before the commit may have upserted them since), survivors' payloads mirror their rows, and
    the store is scrubbed of the deleted text (Database.scrub; with `compact`, the vector shard too).
    Returns how many rows came back under the deleted ids (a restore meanwhile), to index again."""
    came_back = projection.remove_again(db, index, list(gone)) if gone else 0
    projection.refresh_validity(db, index, relinked)
    if not db.scrub(full=compact):
        log.warning("the store could not be scrubbed after a delete (readers kept its write-ahead log or a table "
                    "busy); the daemon retries every 30 s and at its next start")
    if compact:
        index.compact()
    return came_back


def delete_node(db: Database, index: VectorIndex, settings: Settings, node_id: str, *,
                compact: bool = False) -> Deletion:
    """A schema, intention or core schema with its edges and evidence links; the facts stay. Under
    the user's writer lease, which consolidation's graph writes hold too."""
    user_id = node_owner(db, node_id)
    with writer_transaction(db, settings, user_id) as session:
        node = session.get(Node, node_id)
        if node is None:  # deleted by someone else while we waited for the lease
            raise NotFound(f"no graph node with id {node_id}")
        result = Deletion(user_id=user_id, nodes_deleted=[node_id])
        nodes.remove_nodes(session, index, [node])
    result.came_back = _after_delete(db, index, [], [node_id], compact)
    return result


def delete_session(db: Database, index: VectorIndex, settings: Settings, user_id: str, session_id: str, *,
                   compact: bool = False) -> Deletion:
    """Every turn of one session and every item extracted from them."""
    result = Deletion(user_id=user_id)
    with writer_transaction(db, settings, user_id) as session:
        raws = list(session.scalars(select(RawInput).where(RawInput.user_id == user_id,
                                                           RawInput.session_id == session_id)))
        if not raws:
            raise NotFound(f"user {user_id!r} has no session {session_id!r}")
        victims = list(session.scalars(select(Item).where(Item.source_raw_id.in_([r.id for r in raws]))))
        relinked = _delete_items(session, index, victims, result) if victims else []
        gone = set(result.raw_deleted)
        remaining = [r for r in raws if r.id not in gone]
        index.delete([r.id for r in remaining])
        _drop_raws(session, user_id, remaining)
        result.raw_deleted += [r.id for r in remaining]
    result.came_back = _after_delete(db, index, relinked, result.deleted + result.raw_deleted + result.nodes_deleted,
                                     compact)
    return result


def _drop_raws(session: Session, user_id: str, raws: Sequence[RawInput]) -> None:
    """One user's turns go, at once; facts extracted from them stay (beliefs of their own) but lose the link."""
    ids = [r.id for r in raws]
    items.forget_turns(session, ids)
    events.tombstone(session, user_id=user_id, subject_kind=ItemKind.RAW, subject_ids=ids)
    for raw in raws:
        session.delete(raw)


def _apply_relinks(session: Session, victims: Sequence[Item], changes: Sequence[Relink]) -> None:
    for victim in victims:
        victim.supersedes_id = victim.superseded_by_id = None
    now = utcnow()
    for change in changes:
        survivor = session.get(Item, change.id)
        survivor.supersedes_id, survivor.superseded_by_id = change.supersedes_id, change.superseded_by_id
        survivor.valid_to, survivor.updated_at = change.valid_to, now
        projection.mark_stale(session, [survivor])
    session.flush()  # nothing points at a victim any more


def _drop_items(session: Session, victims: Sequence[Item]) -> list[str]:
    ids = [v.id for v in victims]
    session.execute(delete(ItemRevision).where(ItemRevision.item_id.in_(ids)))
    supported = nodes.lose_evidence(session, ids)
    for victim in victims:
        events.tombstone(session, user_id=victim.user_id, subject_kind=victim.kind, subject_ids=[victim.id])
    session.execute(delete(Item).where(Item.id.in_(ids)))
    return supported


def delete_user(db: Database, index: VectorIndex, settings: Settings, user_id: str, *,
                compact: bool = False) -> UserDeletion:
    """Everything of one user: raw turns, items and their revisions, graph nodes and edges,
    consent and consolidation bookkeeping, every vector, and the user row; the user's events
    keep only tombstones, under a pseudonym instead of the user id (dcpm.store.events)."""
    with db.session() as session:
        if session.get(User, user_id) is None:
            raise NotFound(f"unknown user {user_id!r}: nothing has been stored for this user")
    result = UserDeletion(user_id=user_id)
    with writer_transaction(db, settings, user_id) as session:
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
        result.events_redacted = events.forget_user(session, user_id)
        session.execute(delete(User).where(User.id == user_id))
        result.raw_inputs, result.items, result.nodes = len(raw_ids), len(item_ids), len(node_ids)
    result.came_back = _after_delete(db, index, [], raw_ids + item_ids + node_ids, compact)
    return result
