"""The append-only event log: every change is recorded here, in the transaction that makes it,
and read back here. The detail keys of each action are spelt in this module only:

    raw_stored         status                       extracted          operations, llm_calls, tokens
    extraction_failed  error, attempt               created            text, raw_id, supersedes?
    updated            before, after, raw_id        superseded         by, raw_id
    node_created       text, domain                 evidence_added     items
    deleted            deleted: true (a tombstone; the text of the subject's other events is redacted too)

A redacted event keeps its action and subject but its detail becomes the tombstone; a deleted
user's events are all redacted and carry a pseudonym instead of the user id (ids are often
e-mail addresses), and no `deleted` event is added for them. A deleted turn's events also move
to a fresh random subject id, and other events' `raw_id` naming it is cleared: `dcpm import`
derives a turn's id from what it says, so its id would confirm a guess of the deleted text.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Sequence

from sqlalchemy import String, bindparam, cast, or_, select, update
from sqlalchemy.orm import Session

from dcpm.domain import EventAction, ItemKind, Op
from dcpm.store.models import Event

TOMBSTONE = {"deleted": True}
MENTIONS_PER_QUERY = 100  # deleted turns looked for in other events' detail per scan (an OR of LIKEs)


def record(session: Session, action: EventAction, *, user_id: str, subject_kind: str, subject_id: str,
           request_id: str | None = None, **detail: Any) -> None:
    """Append one event in the caller's transaction."""
    session.add(Event(user_id=user_id, action=action, subject_kind=subject_kind, subject_id=subject_id,
                      request_id=request_id, detail=detail))


def tombstone(session: Session, *, user_id: str, subject_kind: str, subject_ids: Sequence[str]) -> int:
    """A hard delete: redact every earlier event of the subjects and leave one `deleted` event
    each, so the log keeps that something was removed but nothing of what it said. Turns' events
    move to fresh ids (their ids may be derived from their text) and no event names them after."""
    redacted = redact(session, subject_ids)
    names = {subject_id: subject_id for subject_id in subject_ids}
    if subject_kind == ItemKind.RAW:
        names = rename_subjects(session, user_id, subject_ids)
        _clear_turn_references(session, user_id, subject_ids)
    for subject_id in subject_ids:
        record(session, EventAction.DELETED, user_id=user_id, subject_kind=subject_kind,
               subject_id=names[subject_id], **TOMBSTONE)
    return redacted


def rename_subjects(session: Session, user_id: str, subject_ids: Sequence[str]) -> dict[str, str]:
    """Move each subject's events (this user's) to a fresh random id: they stay together, as a
    deleted user's stay together under one pseudonym, but nothing links them to the old id."""
    names = {subject_id: str(uuid.uuid4()) for subject_id in dict.fromkeys(subject_ids)}
    if names:
        session.flush()  # the update below runs on the connection, past the session's pending rows
        table = Event.__table__
        session.connection().execute(
            update(table).where(table.c.subject_id == bindparam("old"), table.c.user_id == user_id)
            .values(subject_id=bindparam("new")),
            [{"old": old, "new": new} for old, new in names.items()])
    return names


def _clear_turn_references(session: Session, user_id: str, raw_ids: Sequence[str]) -> None:
    """Other subjects' events (an item created or updated from the turn) keep their text, since
    the item lives on, but lose the deleted turn's id."""
    gone = set(raw_ids)
    ordered = sorted(gone)
    for start in range(0, len(ordered), MENTIONS_PER_QUERY):
        mentions = or_(*[cast(Event.detail, String).contains(raw_id)
                         for raw_id in ordered[start:start + MENTIONS_PER_QUERY]])
        for event in session.scalars(select(Event).where(Event.user_id == user_id, mentions)):
            if event.detail.get("raw_id") in gone:
                event.detail = {**event.detail, "raw_id": None}


def redact(session: Session, subject_ids: Sequence[str]) -> int:
    """Blank the detail (which may hold memory text) of every event about these subjects."""
    if not subject_ids:
        return 0
    result = session.execute(update(Event).where(Event.subject_id.in_(list(subject_ids))).values(detail=TOMBSTONE))
    return int(result.rowcount or 0)


def forget_user(session: Session, user_id: str) -> int:
    """The user is being deleted: blank the detail of every event of theirs, replace the user id
    with a fresh pseudonym and drop the request ids, so the log keeps its shape (one deleted
    user's events stay together) but no row names the user or ties into a later restore."""
    pseudonym = f"deleted-user-{uuid.uuid4().hex}"
    rename_subjects(session, user_id, list(session.scalars(
        select(Event.subject_id).where(Event.user_id == user_id, Event.subject_kind == ItemKind.RAW).distinct())))
    result = session.execute(update(Event).where(Event.user_id == user_id)
                             .values(detail=TOMBSTONE, user_id=pseudonym, request_id=None))
    return int(result.rowcount or 0)


def of_subjects(session: Session, subject_ids: Sequence[str], user_id: str | None = None) -> list[Event]:
    """The events of these subjects (e.g. every revision of a chain), oldest first; with
    `user_id`, only that user's (a restored user's memories keep the ids of a deleted past)."""
    query = select(Event).where(Event.subject_id.in_(list(subject_ids)))
    if user_id is not None:
        query = query.where(Event.user_id == user_id)
    return list(session.scalars(query.order_by(Event.at, Event.id)))


def of_user(session: Session, user_id: str, limit: int) -> list[Event]:
    """A user's events, newest first."""
    return list(session.scalars(select(Event).where(Event.user_id == user_id)
                                .order_by(Event.at.desc(), Event.id.desc()).limit(limit)))


def of_request(session: Session, request_id: str, actions: Iterable[EventAction]) -> list[Event]:
    """What one add_memory request did, in the order it did it."""
    return list(session.scalars(select(Event).where(Event.request_id == request_id,
                                                    Event.action.in_(list(actions))).order_by(Event.id)))


@dataclass(frozen=True)
class ItemChange:
    """One event of an item's chain, read: what the writer's outcome, `dcpm history` and the
    Mem0 history route show."""

    action: str
    item_id: str
    at: datetime
    request_id: str | None
    op: Op | None = None  # ADD / SUPERSEDE for a created item, UPDATE for an in-place edit
    text: str | None = None  # the item's text after this change
    before: str | None = None  # UPDATE: the text it replaced
    supersedes: str | None = None  # SUPERSEDE: the revision it replaced
    superseded_by: str | None = None  # `superseded`: the revision that replaced this one
    raw_id: str | None = None  # the turn it came from
    deleted: bool = False


def item_change(action: str, item_id: str, at: datetime, request_id: str | None,
                detail: dict[str, Any] | None) -> ItemChange:
    detail = detail or {}
    common = dict(action=action, item_id=item_id, at=at, request_id=request_id, raw_id=detail.get("raw_id"))
    if detail.get("deleted"):
        return ItemChange(**common, deleted=True)
    if action == EventAction.CREATED:
        supersedes = detail.get("supersedes")
        return ItemChange(**common, op=Op.SUPERSEDE if supersedes else Op.ADD, text=detail.get("text"),
                          supersedes=supersedes)
    if action == EventAction.UPDATED:
        return ItemChange(**common, op=Op.UPDATE, text=detail.get("after"), before=detail.get("before"))
    if action == EventAction.SUPERSEDED:
        return ItemChange(**common, superseded_by=detail.get("by"))
    return ItemChange(**common)


def change_of(event: Event) -> ItemChange:
    return item_change(event.action, event.subject_id, event.at, event.request_id, event.detail)
