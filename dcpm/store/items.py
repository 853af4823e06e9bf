"""Item writes that keep supersedes chains consistent (DCPM 2.2 iv). Nothing is deleted:
SUPERSEDE links two revisions both ways, UPDATE keeps the previous text as a revision.

Each write is conditional on the state its caller saw (a head is superseded only while it is
still the head, an UPDATE applies only to the revision it read), so two writers that overlap
fork no chain and lose no edit: the later one gets Conflict and its transaction is rolled back.
Content is bounded to its columns before the insert. A write that changes what a row's vector
payload says clears `indexed_at` in the same transaction, so a crash before the index is
updated is repaired at start-up (dcpm.index.projection).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any, Sequence

from sqlalchemy import update
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from dcpm.domain import ANTICIPATION_CHARS, MAX_ANTICIPATIONS, EventAction, Op, as_utc, label, without_nul
from dcpm.errors import Conflict
from dcpm.store import events
from dcpm.store.models import Item, ItemRevision, utcnow


@dataclass(frozen=True)
class ItemContent:
    """What an item says, before it has a time, a source turn and a place in a chain: what
    extraction yields (the writer's `Extracted`)."""

    kind: str
    text: str
    type: str | None = None
    topic: str | None = None
    salience: float = 0.5
    event_time: datetime | None = None
    anticipations: tuple[str, ...] = ()  # situations in which it should come back (dcpm.index.anticipation)

    def placed(self, valid_from: datetime, *, source_raw_id: str | None = None,
               metadata: dict[str, Any] | None = None, **changes: Any) -> NewItem:
        """This content as an item to write, holding from `valid_from`; `changes` replace fields."""
        content = {f.name: getattr(self, f.name) for f in fields(ItemContent)}
        return NewItem(**{**content, **changes}, valid_from=valid_from, source_raw_id=source_raw_id,
                       metadata=metadata)


@dataclass(frozen=True, kw_only=True)
class NewItem(ItemContent):
    """An item ready to write: its content, when it started to hold, and the turn it came from."""

    valid_from: datetime
    source_raw_id: str | None = None
    metadata: dict[str, Any] | None = None


def _label(value: str | None) -> str | None:
    return label(value) or None if value is not None else None


def _storable(moment: datetime | None) -> datetime | None:
    """A time the store can hold in UTC; one past year 9999 or before year 1 is dropped."""
    if moment is None:
        return None
    try:
        return as_utc(moment)
    except (OverflowError, ValueError):
        return None


def anticipation_lines(anticipations: Sequence[str]) -> str | None:
    """Anticipations as their column holds them: one per line, each one line of at most
    ANTICIPATION_CHARS, repeats dropped, at most MAX_ANTICIPATIONS; None for none."""
    lines = [" ".join(without_nul(a).split())[:ANTICIPATION_CHARS] for a in anticipations]
    kept = list(dict.fromkeys(line for line in lines if line))[:MAX_ANTICIPATIONS]
    return "\n".join(kept) or None


def bounded(new: NewItem) -> NewItem:
    """What the LLM (or any caller) produced, cut to fit the columns it goes into (anticipations are
    cut where their column is written: anticipation_lines)."""
    return replace(new, text=without_nul(new.text), type=_label(new.type), topic=_label(new.topic),
                   event_time=_storable(new.event_time))


def add_item(session: Session, user_id: str, new: NewItem, *, request_id: str | None = None) -> Item:
    """ADD: a new item that starts its own chain."""
    new = bounded(new)
    item_id = str(uuid.uuid4())
    item = Item(id=item_id, user_id=user_id, kind=new.kind, text=new.text, type=new.type, topic=new.topic,
                salience=new.salience, event_time=new.event_time, valid_from=new.valid_from, valid_to=None,
                chain_id=item_id, revision=1, source_raw_id=new.source_raw_id, meta=new.metadata or {},
                anticipations=anticipation_lines(new.anticipations))
    session.add(item)
    session.flush()
    events.record(session, EventAction.CREATED, user_id=user_id, subject_kind=item.kind, subject_id=item.id,
                  request_id=request_id, text=new.text, raw_id=new.source_raw_id)
    return item


def supersede(session: Session, old: Item, new: NewItem, *, request_id: str | None = None) -> Item:
    """SUPERSEDE: `new.supersedes = old`, `old.superseded_by = new`; the old item stays.

    Only a chain's head can be superseded, so a chain never forks or gets a doubled pointer:
    the link is set only where it is still empty, and Conflict is raised where another writer
    set it first. The old revision's payload changes (its validity ends), so it is re-indexed.
    """
    if old.superseded_by_id is not None:
        raise Conflict(f"item {old.id} is already superseded by {old.superseded_by_id}")
    new = bounded(new)
    item_id = str(uuid.uuid4())
    valid_from = max(new.valid_from, old.valid_from)
    item = Item(id=item_id, user_id=old.user_id, kind=old.kind, text=new.text, type=new.type or old.type,
                topic=new.topic or old.topic, salience=new.salience, event_time=new.event_time,
                valid_from=valid_from, valid_to=None, chain_id=old.chain_id, supersedes_id=old.id,
                revision=old.revision + 1, source_raw_id=new.source_raw_id, meta=new.metadata or {},
                anticipations=anticipation_lines(new.anticipations))
    session.add(item)
    session.flush()
    _write_if(session, old, Item.superseded_by_id.is_(None), f"item {old.id} was superseded by another writer",
              superseded_by_id=item.id, valid_to=valid_from)
    events.record(session, EventAction.CREATED, user_id=item.user_id, subject_kind=item.kind, subject_id=item.id,
                  request_id=request_id, text=new.text, raw_id=new.source_raw_id, supersedes=old.id)
    events.record(session, EventAction.SUPERSEDED, user_id=old.user_id, subject_kind=old.kind, subject_id=old.id,
                  request_id=request_id, by=item.id, raw_id=new.source_raw_id)
    return item


def update_text(session: Session, item: Item, text: str, *, raw_id: str | None = None,
                request_id: str | None = None, anticipations: Sequence[str] | None = None) -> Item:
    """UPDATE: extend an item in place, keeping the previous text in its revision history.
    Applies only to the revision the caller read (Conflict otherwise); the vector is stale until
    the caller re-indexes the item. `anticipations` replace the item's (None keeps them)."""
    text, before = without_nul(text), item.text
    kept = item.anticipations if anticipations is None else anticipation_lines(anticipations)
    session.add(ItemRevision(item_id=item.id, revision=item.revision, text=item.text, op=Op.UPDATE, raw_id=raw_id))
    _write_if(session, item, (Item.revision == item.revision) & Item.superseded_by_id.is_(None),
              f"item {item.id} changed while it was being updated", text=text, revision=item.revision + 1,
              anticipations=kept)
    events.record(session, EventAction.UPDATED, user_id=item.user_id, subject_kind=item.kind, subject_id=item.id,
                  request_id=request_id, before=before, after=text, raw_id=raw_id)
    return item


def forget_turns(session: Session, raw_ids: Sequence[str]) -> None:
    """Turns are being deleted: the items drawn from them stay (they are beliefs of their own) and
    so do their revisions, but neither names the turns any more."""
    if not raw_ids:
        return
    session.execute(update(Item).where(Item.source_raw_id.in_(raw_ids)).values(source_raw_id=None))
    session.execute(update(ItemRevision).where(ItemRevision.raw_id.in_(raw_ids)).values(raw_id=None))


def _write_if(session: Session, item: Item, condition: Any, conflict: str, **values: Any) -> None:
    """One conditional UPDATE of `item` (it changes what the row's vector says, so `indexed_at`
    is cleared); Conflict if another writer changed the row first. The loaded object is brought
    up to date without being marked dirty."""
    values.update(updated_at=utcnow(), indexed_at=None)
    session.flush()
    written = session.execute(update(Item).where(Item.id == item.id, condition).values(**values)
                              .execution_options(synchronize_session=False)).rowcount
    if not written:
        raise Conflict(conflict)
    for key, value in values.items():
        set_committed_value(item, key, value)
