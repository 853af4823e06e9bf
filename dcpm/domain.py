"""The shared vocabulary of the DCPM memory model, defined once: memory and node kinds, writer
operations, statuses, event actions, a turn as the writer receives it, and the user-id rule.

Everything else (models, writer, read path, consolidation, API shapes) imports these names
instead of spelling the strings again.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from typing import Annotated, Any

from pydantic import AfterValidator, TypeAdapter, ValidationError

from dcpm.errors import Invalid

try:
    from enum import StrEnum
except ImportError:  # Python 3.10: the same behaviour, spelt out
    class StrEnum(str, Enum):  # type: ignore[no-redef]
        def __str__(self) -> str:
            return str(self.value)


class ItemKind(StrEnum):
    """What System 1 writes (DCPM 2.1); a raw turn is the kind `raw`."""

    RAW = "raw"
    FACT = "fact"
    IDENTITY = "identity"
    SUMMARY = "summary"


ITEM_KINDS = (ItemKind.FACT, ItemKind.IDENTITY, ItemKind.SUMMARY)  # items proper, with chains
SEARCH_KINDS = (ItemKind.RAW, *ITEM_KINDS)  # what the read path searches by default
# An item's anticipations (T-Mem's triggers; dcpm.index.anticipation): the held-out writer wrote 4-6
MAX_ANTICIPATIONS, ANTICIPATION_CHARS = 6, 300


class NodeKind(StrEnum):
    """What System 2 induces into the graph (DCPM 2.3)."""

    SCHEMA = "schema"
    INTENTION = "intention"
    CORE_SCHEMA = "core_schema"


class Op(StrEnum):
    """Reconciliation decisions (DCPM 2.2 iii), plus RAW for a verbatim turn in a response."""

    ADD = "ADD"
    UPDATE = "UPDATE"
    SUPERSEDE = "SUPERSEDE"
    NONE = "NONE"
    RAW = "RAW"


class RawStatus(StrEnum):
    """A raw turn: stored only (`raw`), waiting for extraction (`pending`), extracted (`done`), or
    given up on after `writer_max_attempts` (`failed`, with its reason; `dcpm backfill
    --retry-failed` tries again). A failed turn is still stored and searchable."""

    RAW = "raw"
    PENDING = "pending"
    DONE = "done"
    FAILED = "failed"


class NodeStatus(StrEnum):
    """A graph node is active, or lost part of its evidence to a hard delete and is marked for
    re-induction (dcpm.admin.delete)."""

    ACTIVE = "active"
    NEEDS_REINDUCTION = "needs_reinduction"


class EventAction(StrEnum):
    """Every change is an event in the append-only log (dcpm.store.events)."""

    RAW_STORED = "raw_stored"
    EXTRACTED = "extracted"
    EXTRACTION_FAILED = "extraction_failed"
    CREATED = "created"
    UPDATED = "updated"
    SUPERSEDED = "superseded"
    NODE_CREATED = "node_created"
    EVIDENCE_ADDED = "evidence_added"
    DELETED = "deleted"


@dataclass
class Turn:
    """One turn as the writer receives it, from the HTTP API, an import file or the CLI."""

    text: str
    role: str = "user"
    speaker: str | None = None
    session_id: str | None = None
    timestamp: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    id: str | None = None
    own_metadata: dict[str, Any] = field(default_factory=dict)  # what dcpm records itself (dcpm.stored_values)


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def as_utc(moment: datetime | None) -> datetime:
    """An aware UTC time; a naive one is taken as UTC, None as now."""
    if moment is None:
        return utcnow()
    try:
        return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)
    except OverflowError:  # 9999-12-31T23:59:59-12:00 is a valid date whose UTC time is not
        raise InvalidMoment(f"{moment.isoformat()} is out of range: its UTC time falls outside years 1-9999") from None


_MOMENT = TypeAdapter(datetime)


def unix_time(value: int | float | str) -> datetime:
    """A Unix time (a number, or a string of one) in UTC, read as dcpm's HTTP models read one
    (pydantic's rule: seconds, milliseconds when beyond 2e10 either way), so a number means the
    same moment in a request and in an import file. InvalidMoment for a bool, or past years 1-9999."""
    try:
        return as_utc(_MOMENT.validate_python(value))
    except ValidationError:
        raise InvalidMoment(f"{value!r} is no Unix time within years 1-9999") from None


LABEL_CHARS = 64  # items.type and items.topic are String(64)
INT64_RANGE = (-(1 << 63), (1 << 63) - 1)  # the integers the stores and the vector payloads hold
MAX_OFFSET = 10**12  # of a listing: past any store, and (times a page) within the database's 64-bit OFFSET
MAX_EVENTS = 5000  # of a user's event log in one answer
MAX_PAGE = 1000  # items of a listing in one answer
MAX_RUNS = 1000  # consolidation runs in one answer


def check_page(limit: int, offset: int) -> None:
    """A listing's page; the CLI checks it before it asks, so a daemon's refusal reads the same."""
    if not 1 <= limit <= MAX_PAGE or not 0 <= offset <= MAX_OFFSET:
        raise Invalid(f"limit must be 1..{MAX_PAGE} and offset 0..{MAX_OFFSET}")


def check_limit(limit: int, most: int) -> None:
    """How many events (MAX_EVENTS) or runs (MAX_RUNS) one answer holds; checked as `check_page` is."""
    if not 1 <= limit <= most:
        raise Invalid(f"limit must be 1..{most}")


def without_nul(text: str) -> str:
    """Text as every store takes it: PostgreSQL refuses NUL characters in text columns."""
    return text.replace("\x00", "")


def label(text: str) -> str:
    """A short label (a type, a topic) cut to fit its column: clamped, never refused."""
    return without_nul(text).strip()[:LABEL_CHARS]


USER_ID_CHARS = 128
USER_ID = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9_.:@\-]{{0,{USER_ID_CHARS - 1}}}$")


def check_user_id(value: str) -> str:
    """The user-id rule; Invalid (a ValueError too, so Pydantic validators report it) otherwise."""
    if not USER_ID.fullmatch(value or ""):  # match() would let a trailing newline through
        raise InvalidUserId(f"user_id must be 1-{USER_ID_CHARS} characters of letters, digits and _ . : @ -, "
                            "starting with a letter or digit")
    return value


class InvalidUserId(Invalid, ValueError):
    """Raised by check_user_id: the project's own Invalid, and a ValueError for Pydantic."""


class InvalidMoment(Invalid, ValueError):
    """Raised by as_utc, also inside Pydantic validators (hence a ValueError too)."""


UserId = Annotated[str, AfterValidator(check_user_id)]


MEMORY_ID_VERSIONS = (4, 5)  # random ids, and ids derived from a key (a client's id, an imported turn)


def canonical_uuid(value: Any) -> str | None:
    """A UUID in its one canonical spelling (lower case, no braces, no urn: prefix), the only one
    the store and the vector index keep; None for anything that is no UUID."""
    try:
        return str(uuid.UUID(value))
    except (ValueError, AttributeError, TypeError):
        return None


def spelled_as_stored(memory_id: str) -> str:
    """A memory or node id in the spelling the store keeps: a caller may write it in upper case or
    braces. Anything that is no UUID is left for the checks to refuse."""
    return canonical_uuid(memory_id) or memory_id


def check_memory_id(value: str, what: str = "memory") -> str:
    """Memory and node ids are UUIDs; anything else is refused before the store is asked."""
    if canonical_uuid(value) is None:
        raise Invalid(f"{value!r} is not a {what} id (a UUID)")
    return value
