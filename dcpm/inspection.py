"""Read models of everything stored and inferred, for inspection (the CLI, the admin page, the
HTTP API's inspection routes): lists, one memory with its chain, users, graph nodes, owners,
the event log, consent and runs. Plain queries over the relational store; no model, no index,
so these answer without loading an embedder."""

from __future__ import annotations

from datetime import datetime
from typing import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from dcpm.api.models import (
    ChainLink,
    ConsentOut,
    ConsentUpdate,
    EvidenceOut,
    GraphEdgeOut,
    GraphNodeOut,
    GraphOut,
    HistoryEvent,
    HistoryResponse,
    ItemOut,
    ListResponse,
    NodeOut,
    RawOut,
    RevisionOut,
    UserOut,
)
from dcpm.domain import ITEM_KINDS, ItemKind, NodeStatus, RawStatus, as_utc, check_memory_id, check_page, check_user_id
from dcpm.errors import Conflict, Invalid, NotFound
from dcpm.index.base import Condition
from dcpm.index.row_filter import metadata_clause
from dcpm.store import events
from dcpm.store.chains import believed_at, walk_chain
from dcpm.store.consent import consent_of, set_consent
from dcpm.store.db import Database
from dcpm.store.listing import UNEXTRACTED, page, page_together, per_user
from dcpm.store.models import Edge, Evidence, Item, ItemRevision, Node, RawInput, User

ITEM_STATUSES = ("current", "superseded")
EVERY_ITEM = "items"  # the listing kind of items of every kind, without turns


def require_user(session: Session, user_id: str) -> None:
    """A valid user id with something stored; the one 'unknown user' answer of every surface."""
    check_user_id(user_id)
    if session.get(User, user_id) is None:
        raise NotFound(f"unknown user {user_id!r}: nothing has been stored for this user")


def known_user(db: Database, user_id: str) -> None:
    """NotFound unless something is stored for this user (Invalid for a malformed id)."""
    with db.session() as session:
        require_user(session, user_id)


def list_memories(db: Database, user_id: str, kind: str | None = None, limit: int = 50, offset: int = 0,
                  status: str | None = None, topic: str | None = None, since: datetime | None = None,
                  metadata: Sequence[Condition] = ()) -> ListResponse:
    """A user's memories, oldest first. With no `kind`, what a search finds, each once: the items and the
    turns not (or not yet) extracted into items (stored verbatim only, waiting, failed); with an item kind
    those items, with kind="items" every item, with kind="raw" every turn. `status` is current or superseded
    for items (a raw status with kind="raw"), `since` compares the time the belief started to hold (or the
    turn was said), `metadata` holds metadata conditions (dcpm.index.row_filter)."""
    check_page(limit, offset)
    since = as_utc(since) if since else None
    with db.session() as session:
        require_user(session, user_id)
        dialect = session.get_bind().dialect.name
        turns = select(RawInput).where(RawInput.user_id == user_id,
                                       metadata_clause(RawInput.meta, metadata, dialect))
        if since:
            turns = turns.where(RawInput.timestamp >= since)
        if kind == ItemKind.RAW:
            if status is not None and status not in tuple(RawStatus):
                raise Invalid(f"status of raw turns is one of {', '.join(RawStatus)}")
            total, rows = page(session, turns.where(RawInput.status == status) if status else turns,
                                (RawInput.timestamp, RawInput.created_at, RawInput.position, RawInput.id), offset,
                                limit)  # as page_together orders them: one order, kept by a restore
            return ListResponse(user_id=user_id, total=total, items=[raw_out(r) for r in rows])
        if kind is not None and kind not in (*ITEM_KINDS, EVERY_ITEM):
            raise Invalid(f"unknown kind {kind!r}; use one of {', '.join(ItemKind)}, or {EVERY_ITEM}")
        if status not in (None, *ITEM_STATUSES):
            raise Invalid(f"status of items is current or superseded (raw turns: {', '.join(RawStatus)})")
        query = select(Item).where(Item.user_id == user_id, metadata_clause(Item.meta, metadata, dialect))
        if kind in ITEM_KINDS:
            query = query.where(Item.kind == kind)
        if status:
            query = query.where(Item.superseded_by_id.is_(None) if status == "current"
                                else Item.superseded_by_id.is_not(None))
        if topic:
            query = query.where(Item.topic == topic)
        if since:
            query = query.where(Item.valid_from >= since)
        if kind is None and status != "superseded" and not topic:  # a turn is no revision and has no topic
            total, rows = page_together(session, query, turns.where(UNEXTRACTED), offset, limit)
            return ListResponse(user_id=user_id, total=total, items=[_out(r) for r in rows])
        total, rows = page(session, query, (Item.valid_from, Item.created_at, Item.id), offset, limit)
        return ListResponse(user_id=user_id, total=total, items=[item_out(i) for i in rows])


def _out(row: Item | RawInput) -> ItemOut | RawOut:
    return raw_out(row) if isinstance(row, RawInput) else item_out(row)


def chain_links(chain: list[Item], as_of: datetime | None) -> list[ChainLink]:
    """A walked chain as the reader sees it, marking the belief that holds now (or at `as_of`)."""
    holding = believed_at(chain, as_of)
    return [ChainLink(id=n.id, text=n.text, revision=n.revision, valid_from=n.valid_from, valid_to=n.valid_to,
                      current=holding is not None and n.id == holding.id) for n in chain]


def find_memory(session: Session, memory_id: str) -> RawInput | Item | None:
    """The raw turn or the item with this id, the one lookup of get, owner_of, delete and edit;
    an id in both tables (imports once chose ids) is refused, never answered two ways."""
    raw, item = session.get(RawInput, memory_id), session.get(Item, memory_id)
    if raw is not None and item is not None:
        raise Conflict(f"{memory_id} names both a raw turn and an item; delete the user's session or the "
                       "user to remove the raw turn")
    return raw if raw is not None else item


def get(db: Database, memory_id: str) -> ItemOut | RawOut:
    """One raw turn, or one item with its whole chain and its revisions."""
    check_memory_id(memory_id)
    with db.session() as session:
        found = find_memory(session, memory_id)
        if isinstance(found, RawInput):
            return raw_out(found)
        if found is None:
            raise NotFound(f"no memory with id {memory_id}")
        item = found
        chain = list(session.scalars(select(Item).where(Item.chain_id == item.chain_id)))
        revisions = list(session.scalars(select(ItemRevision).where(ItemRevision.item_id == item.id)
                                         .order_by(ItemRevision.revision)))
    out = item_out(item)
    out.chain = chain_links(walk_chain(chain), None)
    out.revisions = [RevisionOut(revision=r.revision, text=r.text, op=r.op, raw_id=r.raw_id,
                                 created_at=r.created_at) for r in revisions]
    return out


def owner_of(db: Database, memory_id: str) -> str:
    """The user a memory (item or raw turn) belongs to; Invalid for a non-id, NotFound if absent."""
    check_memory_id(memory_id)
    with db.session() as session:
        found = find_memory(session, memory_id)
        if found is None:
            raise NotFound(f"no memory with id {memory_id}")
        return found.user_id


def users(db: Database, only: str | None = None) -> list[UserOut]:
    """Users with stored memories; `only` narrows the list to that one user (an API key's)."""
    with db.session() as session:
        raws, items = per_user(session, RawInput), per_user(session, Item)
        unextracted = per_user(session, RawInput, UNEXTRACTED)
        query = select(User).order_by(User.id)
        found = list(session.scalars(query if only is None else query.where(User.id == only)))
    return [UserOut(id=u.id, created_at=u.created_at, last_seen_at=u.last_seen_at, raw_inputs=raws.get(u.id, 0),
                    items=items.get(u.id, 0), memories=items.get(u.id, 0) + unextracted.get(u.id, 0)) for u in found]


def node(db: Database, node_id: str) -> NodeOut:
    """A schema / intention / core-schema node with its evidence and edges."""
    with db.session() as session:
        found = session.get(Node, node_id)
        if found is None:
            raise NotFound(f"no graph node with id {node_id}")
        evidence = list(session.scalars(select(Item).join(Evidence, Evidence.item_id == Item.id)
                                        .where(Evidence.node_id == node_id).order_by(Item.valid_from)))
        edges = list(session.scalars(select(Edge).where((Edge.source_id == node_id) | (Edge.target_id == node_id))))
        return NodeOut(id=found.id, kind=found.kind, user_id=found.user_id, domain=found.domain, text=found.text,
                       status=found.status, behavior=found.behavior, created_at=found.created_at,
                       evidence=[EvidenceOut(id=i.id, kind=i.kind, text=i.text, current=i.is_current)
                                 for i in evidence],
                       edges=[GraphEdgeOut(source=e.source_id, target=e.target_id, type=e.type) for e in edges])


def node_owner(db: Database, node_id: str) -> str:
    """The user a graph node belongs to; NotFound if absent."""
    with db.session() as session:
        user_id = session.scalar(select(Node.user_id).where(Node.id == node_id))
    if user_id is None:
        raise NotFound(f"no graph node with id {node_id}")
    return user_id


def history(db: Database, item_id: str) -> HistoryResponse:
    """Every event of an item's chain: created, updated (before/after), superseded, by which input."""
    item = get(db, item_id)
    if not isinstance(item, ItemOut):
        raise Invalid(f"{item_id} is a raw input; history is kept for items")
    with db.session() as session:
        found = events.of_subjects(session, [link.id for link in item.chain or []] or [item.id], item.user_id)
    return HistoryResponse(item_id=item.id, chain_id=item.chain_id, events=[history_event(e) for e in found])


def user_events(db: Database, user_id: str, limit: int = 200) -> list[HistoryEvent]:
    """The user's event log, newest first (deleted subjects show only tombstones)."""
    with db.session() as session:
        require_user(session, user_id)
        return [history_event(e) for e in events.of_user(session, user_id, limit)]


def consent(db: Database, user_id: str, update: ConsentUpdate | None = None) -> ConsentOut:
    """The user's per-layer consent; with `update`, changed first."""
    with db.session() as session:
        require_user(session, user_id)
        found = set_consent(session, user_id, **update.model_dump()) if update else consent_of(session, user_id)
        return ConsentOut(user_id=user_id, schemas=found.schemas, intentions=found.intentions,
                          core_schemas=found.core_schemas)


def graph(db: Database, user_id: str) -> GraphOut:
    """The user's active schema / intention / core-schema nodes with their evidence ids and edges;
    one awaiting re-induction after a delete (its text may repeat deleted memories) only by id."""
    with db.session() as session:
        require_user(session, user_id)
        nodes = list(session.scalars(select(Node).where(Node.user_id == user_id, Node.status == NodeStatus.ACTIVE)
                                     .order_by(Node.created_at)))
        evidence: dict[str, list[str]] = {n.id: [] for n in nodes}
        for node_id, item_id in session.execute(select(Evidence.node_id, Evidence.item_id)
                                                .where(Evidence.node_id.in_(list(evidence)))):
            evidence[node_id].append(item_id)
        edges = [e for e in session.scalars(select(Edge).where(Edge.user_id == user_id))
                 if e.source_id in evidence and e.target_id in evidence]
    return GraphOut(user_id=user_id,
                    nodes=[GraphNodeOut(id=n.id, kind=n.kind, domain=n.domain, text=n.text, status=n.status,
                                        evidence=sorted(evidence[n.id])) for n in nodes],
                    edges=[GraphEdgeOut(source=e.source_id, target=e.target_id, type=e.type) for e in edges])


def history_event(event) -> HistoryEvent:  # type: ignore[no-untyped-def]
    return HistoryEvent(at=event.at, action=event.action, item_id=event.subject_id, request_id=event.request_id,
                        detail=event.detail or {})


def raw_out(raw: RawInput) -> RawOut:
    return RawOut(id=raw.id, user_id=raw.user_id, text=raw.text, role=raw.role, speaker=raw.speaker,
                  session_id=raw.session_id, timestamp=raw.timestamp, created_at=raw.created_at,
                  status=raw.status, error=raw.error, metadata=raw.meta or {})


def item_out(item: Item) -> ItemOut:
    return ItemOut(id=item.id, kind=item.kind, user_id=item.user_id, text=item.text, type=item.type,
                   topic=item.topic, salience=item.salience, event_time=item.event_time,
                   valid_from=item.valid_from, valid_to=item.valid_to, current=item.is_current,
                   chain_id=item.chain_id, supersedes=item.supersedes_id, superseded_by=item.superseded_by_id,
                   revision=item.revision, source_raw_id=item.source_raw_id, created_at=item.created_at,
                   updated_at=item.updated_at, metadata=item.meta or {}, anticipations=item.anticipation_list)
