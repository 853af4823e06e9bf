"""Item writes that keep supersedes chains consistent (DCPM 2.2 iv). Nothing is deleted:
SUPERSEDE links two revisions both ways, UPDATE keeps the previous text as a revision."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from dcpm.domain import EventAction, Op
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


def add_item(session: Session, user_id: str, new: NewItem, *, request_id: str | None = None) -> Item:
    """ADD: a new item that starts its own chain."""
    item_id = str(uuid.uuid4())
    item = Item(id=item_id, user_id=user_id, kind=new.kind, text=new.text, type=new.type, topic=new.topic,
                salience=new.salience, event_time=new.event_time, valid_from=new.valid_from, valid_to=None,
                chain_id=item_id, revision=1, source_raw_id=new.source_raw_id, meta=new.metadata or {})
    session.add(item)
    session.flush()
    events.record(session, EventAction.CREATED, user_id=user_id, subject_kind=item.kind, subject_id=item.id,
                  request_id=request_id, text=new.text, raw_id=new.source_raw_id)
    return item


def supersede(session: Session, old: Item, new: NewItem, *, request_id: str | None = None) -> Item:
    """SUPERSEDE: `new.supersedes = old`, `old.superseded_by = new`; the old item stays.

    Only a chain's head can be superseded, so a chain never forks or gets a doubled pointer.
    """
    if old.superseded_by_id is not None:
        raise Conflict(f"item {old.id} is already superseded by {old.superseded_by_id}")
    item_id = str(uuid.uuid4())
    valid_from = max(new.valid_from, old.valid_from)
    item = Item(id=item_id, user_id=old.user_id, kind=old.kind, text=new.text, type=new.type or old.type,
                topic=new.topic or old.topic, salience=new.salience, event_time=new.event_time,
                valid_from=valid_from, valid_to=None, chain_id=old.chain_id, supersedes_id=old.id,
                revision=old.revision + 1, source_raw_id=new.source_raw_id, meta=new.metadata or {})
    session.add(item)
    session.flush()
    old.superseded_by_id = item.id
    old.valid_to = valid_from
    old.updated_at = utcnow()
    events.record(session, EventAction.CREATED, user_id=item.user_id, subject_kind=item.kind, subject_id=item.id,
                  request_id=request_id, text=new.text, raw_id=new.source_raw_id, supersedes=old.id)
    events.record(session, EventAction.SUPERSEDED, user_id=old.user_id, subject_kind=old.kind, subject_id=old.id,
                  request_id=request_id, by=item.id, raw_id=new.source_raw_id)
    return item


def update_text(session: Session, item: Item, text: str, *, raw_id: str | None = None,
                request_id: str | None = None) -> Item:
    """UPDATE: extend an item in place, keeping the previous text in its revision history."""
    session.add(ItemRevision(item_id=item.id, revision=item.revision, text=item.text, op=Op.UPDATE, raw_id=raw_id))
    before = item.text
    item.text = text
    item.revision += 1
    item.updated_at = utcnow()
    events.record(session, EventAction.UPDATED, user_id=item.user_id, subject_kind=item.kind, subject_id=item.id,
                  request_id=request_id, before=before, after=text, raw_id=raw_id)
    return item

