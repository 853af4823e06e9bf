"""Raw persist (DCPM 2.2 i): turns are committed verbatim before anything else touches them."""

from __future__ import annotations

import json
import uuid
from typing import Sequence

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from dcpm.config import Settings
from dcpm.domain import EventAction, ItemKind, RawStatus, Turn, as_utc, canonical_uuid
from dcpm.errors import Invalid
from dcpm.store import events
from dcpm.store.models import RawInput, User, utcnow
from dcpm.stored_values import check_callers_keys, check_metadata, check_text

# Namespace for deterministic raw ids, so re-importing a file finds what is already there.
RAW_ID_NAMESPACE = uuid.UUID("6f1d3c1e-2b53-4d3f-9a57-5f2f0f6d8a10")
# Namespace of the store's id for a client's turn id: one user's ids never meet another's.
CLIENT_ID_NAMESPACE = uuid.UUID("3b0e9c52-8f1d-4b7a-a1c4-2d6e0f9b7c35")
# The widths of the columns a turn's labels are stored in (an import is held to them as HTTP is).
ROLE_CHARS, SPEAKER_CHARS, SESSION_CHARS = (RawInput.__table__.c[name].type.length
                                            for name in ("role", "speaker", "session_id"))
DOT_SEGMENTS = (".", "..")  # ids a URL path cannot hold as one segment


def check_turns(turns: Sequence[Turn], settings: Settings) -> None:
    """Size limits, checked before anything is written so a bad request changes nothing."""
    if not turns:
        raise Invalid("no turns to store")
    if len(turns) > settings.max_messages:
        raise Invalid(f"too many messages: {len(turns)} > {settings.max_messages}")
    seen: dict[str, int] = {}
    for number, turn in enumerate(turns, 1):
        for what, text in (("", turn.text), ("speaker of ", turn.speaker), ("role of ", turn.role),
                           ("session id of ", turn.session_id)):
            if text is not None:
                check_text(text, f"the {what}message {number}")
        for what, text, most in (("role", turn.role, ROLE_CHARS), ("speaker", turn.speaker, SPEAKER_CHARS),
                                 ("session id", turn.session_id, SESSION_CHARS)):
            if text is not None and len(text) > most:  # the column's width, as the HTTP models allow
                raise Invalid(f"the {what} of message {number} is {len(text)} characters; the limit is {most}")
        if turn.session_id in DOT_SEGMENTS:  # DELETE .../sessions/.. reaches the daemon as DELETE /v1/users/U
            raise Invalid(f"the session id of message {number} is {turn.session_id!r}, which no URL can name: "
                          "HTTP clients read it as the route above; choose another session id")
        check_stored_text(turn.text, settings, f"message {number}")
        check_metadata(turn.metadata, f"the metadata of message {number}")
        check_callers_keys(turn.metadata, f"the metadata of message {number}")
        check_metadata(turn.own_metadata, f"the agent or app of message {number}")
        if turn.timestamp is not None:
            as_utc(turn.timestamp)  # a date whose UTC time is out of range is refused here, not at the commit
        if turn.id is not None:
            canonical = canonical_id(turn.id, number)
            if canonical in seen:
                raise Invalid(f"messages {seen[canonical]} and {number} carry the same id {canonical}; "
                              "an id may appear only once in a batch (twice is one turn sent twice)")
            seen[canonical] = number
        if len(json.dumps(turn.metadata, default=str)) > settings.max_metadata_bytes:
            raise Invalid(f"metadata of message {number} is larger than {settings.max_metadata_bytes} bytes")


def check_stored_text(text: str, settings: Settings, what: str) -> None:
    """What any text dcpm stores must be (a turn's, an edited item's): no NUL, valid Unicode, not
    blank (zero-width characters too) and at most max_text_chars; `what` names it in the refusal."""
    check_text(text, what)
    if not any(ch.isprintable() and not ch.isspace() for ch in text):
        raise Invalid(f"{what} is empty")
    if len(text) > settings.max_text_chars:
        raise Invalid(f"{what} is {len(text)} characters; the limit is {settings.max_text_chars}")


def canonical_id(value: str, number: int = 1) -> str:
    """A UUID in its one canonical spelling (lower case, no braces, no urn prefix): the vector
    index canonicalises point ids, so two spellings must never reach the store as two ids."""
    canonical = canonical_uuid(value)
    if canonical is None:
        raise Invalid(f"message {number} has id {value!r}, which is not a UUID")
    return canonical


def stored_raw_id(user_id: str, client_id: str) -> str:
    """The store's id of a turn the client sent with its own id: derived from the user and the
    canonical client id, so ids are scoped to their user (another user's identical or guessed
    id never collides, pre-empts or probes) and a re-sent turn gets the same id again."""
    return str(uuid.uuid5(CLIENT_ID_NAMESPACE, f"{user_id}:{canonical_id(client_id)}"))


def deterministic_raw_id(user_id: str, turn: Turn, occurrence: int) -> str:
    key = json.dumps([user_id, turn.id, turn.session_id, turn.timestamp.isoformat() if turn.timestamp else None,
                      turn.role, turn.speaker, turn.text, occurrence])
    return str(uuid.uuid5(RAW_ID_NAMESPACE, key))


def touch_user(session: Session, user_id: str) -> None:
    """Create the user on first sight, atomically: concurrent first writes must not collide."""
    now = utcnow()
    dialect = session.get_bind().dialect.name
    if dialect in ("sqlite", "postgresql"):
        insert = sqlite_insert if dialect == "sqlite" else postgresql_insert
        session.execute(insert(User).values(id=user_id, created_at=now, last_seen_at=now)
                        .on_conflict_do_update(index_elements=[User.id], set_={"last_seen_at": now}))
        return
    user = session.get(User, user_id)
    if user is None:
        session.add(User(id=user_id, created_at=now, last_seen_at=now))
        session.flush()
    else:
        user.last_seen_at = now


def persist_turns(session: Session, user_id: str, turns: Sequence[Turn], *, request_id: str, status: RawStatus,
                  skip_existing: bool = False) -> list[RawInput]:
    """Write the turns as raw inputs in the caller's transaction; returns the rows written. A turn
    with a client id is stored under `stored_raw_id`; `skip_existing` skips those this user has."""
    touch_user(session, user_id)
    ids = [stored_raw_id(user_id, t.id) if t.id else str(uuid.uuid4()) for t in turns]
    existing = set(session.scalars(select(RawInput.id).where(RawInput.id.in_(ids), RawInput.user_id == user_id))
                   ) if skip_existing else set()
    rows = []
    for position, (turn, raw_id) in enumerate(zip(turns, ids)):
        if raw_id in existing:
            continue
        raw = RawInput(
            id=raw_id, user_id=user_id, request_id=request_id, position=position,
            session_id=turn.session_id, role=turn.role, speaker=turn.speaker, text=turn.text,
            timestamp=as_utc(turn.timestamp), meta={**turn.metadata, **turn.own_metadata}, status=status,
        )
        rows.append(raw)
    session.add_all(rows)
    for raw in rows:
        events.record(session, EventAction.RAW_STORED, user_id=user_id, subject_kind=ItemKind.RAW, subject_id=raw.id,
                      request_id=request_id, status=status)
    return rows
