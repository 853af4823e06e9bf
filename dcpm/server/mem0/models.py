"""Mem0 platform API shapes, as the `mem0ai` MemoryClient sends and reads them, and their mapping
onto dcpm's own shapes. Pure functions over plain data: the routes parse, call the service and
render with these.

The mapping, in short: a Mem0 "memory" is a dcpm item (fact, identity, summary); search also
returns the verbatim turns dcpm recalls from (kind "raw"), and with `infer: false` those turns are
what an add stores. Mem0's `user_id` is dcpm's user and `run_id` its session. A revision that
superseded another appears in `history` as an UPDATE of the old memory by its successor. dcpm's
own fields (kind, chain, current, ...) ride along as extra fields, which Mem0 clients ignore.
"""

from __future__ import annotations

import ast
import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from dcpm.errors import Invalid
from dcpm.domain import SEARCH_KINDS, ItemKind
from dcpm.api.models import (
    AddMemoryResponse,
    ChainLink,
    DeleteResponse,
    DeleteUserResponse,
    HistoryResponse,
    ItemOut,
    NodeHit,
    RawOut,
    SearchHit,
    UserOut,
)

# dcpm has no agent or app scopes; a filter on one is refused rather than silently widened.
UNSUPPORTED_SCOPES = ("agent_id", "app_id")
WILDCARD = "*"
HISTORY_EVENT_NAMESPACE = uuid.UUID("0c3b4f3e-9d0a-4b8e-8f7e-3d1c6a2b5e47")


class Mem0Request(BaseModel):
    """Mem0 sends many options dcpm has no use for (custom_categories, rerank, ...): accepted, ignored."""

    model_config = ConfigDict(extra="allow")


class Mem0Message(Mem0Request):
    role: str = "user"
    content: str
    name: str | None = None


class Mem0Scoped(Mem0Request):
    """Entity ids may come at the top level (REST callers) or inside `filters` (the 2.x client)."""

    filters: dict[str, Any] | None = None
    user_id: str | None = None
    run_id: str | None = None
    agent_id: str | None = None
    app_id: str | None = None

    def scope(self) -> "Scope":
        return scope_of(self.filters, user_id=self.user_id, run_id=self.run_id, agent_id=self.agent_id,
                        app_id=self.app_id)


class Mem0AddRequest(Mem0Scoped):
    messages: list[Mem0Message]
    metadata: dict[str, Any] | None = None
    infer: bool = True
    timestamp: float | None = None  # Unix seconds


class Mem0SearchRequest(Mem0Scoped):
    query: str
    top_k: int = 10
    threshold: float | None = None
    latest_only: bool = False
    kinds: list[ItemKind] = list(SEARCH_KINDS)  # dcpm's own: verbatim turns are searched too unless left out


class Mem0ListRequest(Mem0Scoped):
    latest_only: bool = False
    kind: str | None = None  # dcpm's own: one item kind, or "raw" for the verbatim turns


class Mem0UpdateRequest(Mem0Request):
    text: str | None = None


class Mem0Memory(BaseModel):
    id: str
    memory: str
    user_id: str
    run_id: str | None = None
    hash: str
    metadata: dict[str, Any] | None = None
    categories: list[str] = []
    created_at: datetime
    updated_at: datetime | None = None
    immutable: bool = False
    expiration_date: str | None = None
    score: float | None = None
    # dcpm's own fields
    kind: str
    current: bool | None = None
    chain_id: str | None = None
    supersedes: str | None = None
    superseded_by: str | None = None
    revision: int | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    chain: list[ChainLink] | None = None
    believed_now: ChainLink | None = None


class Mem0AddResult(BaseModel):
    id: str
    event: Literal["ADD", "UPDATE", "NONE"]
    memory: str
    previous_memory_id: str | None = None  # the revision a SUPERSEDE replaced, or the item UPDATE extended
    kind: str


class Mem0AddResponse(BaseModel):
    message: str
    status: Literal["SUCCEEDED", "PENDING", "FAILED"]
    event_id: str
    results: list[Mem0AddResult]
    raw_ids: list[str]


class Mem0SearchResponse(BaseModel):
    results: list[Mem0Memory]
    nodes: list[NodeHit] = []  # schemas and intentions surfaced by the hits (DCPM 2.4)
    context: str = ""


class Mem0Page(BaseModel):
    count: int
    next: str | None = None
    previous: str | None = None
    results: list[Mem0Memory]


class Mem0HistoryEntry(BaseModel):
    id: str
    memory_id: str
    input: list[dict[str, Any]] = []
    old_memory: str | None
    new_memory: str | None
    user_id: str
    event: Literal["ADD", "UPDATE", "DELETE"]
    metadata: dict[str, Any] | None = None
    created_at: datetime
    updated_at: datetime
    # dcpm's own fields
    action: str
    successor_id: str | None = None
    request_id: str | None = None


class Mem0Entity(BaseModel):
    id: str
    name: str
    type: Literal["user"] = "user"
    total_memories: int
    created_at: datetime
    updated_at: datetime
    owner: str | None = None
    organization: str | None = None
    metadata: dict[str, Any] = {}


class Mem0Entities(BaseModel):
    count: int
    next: str | None = None
    previous: str | None = None
    results: list[Mem0Entity]


class Mem0Ping(BaseModel):
    status: str = "ok"
    message: str
    # dcpm has no organisations or projects (one daemon, one key), but MemoryClient refuses to start
    # without both, so the daemon names itself as one.
    org_id: str = "dcpm"
    project_id: str = "default"
    user_email: str | None = None


class Mem0Updated(Mem0Memory):
    message: str = "Memory updated successfully!"


class Mem0Deleted(DeleteResponse):
    message: str = "Memory deleted successfully!"


class Mem0DeletedAll(DeleteUserResponse):
    message: str = "Memories deleted successfully!"


# --- scopes ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scope:
    user_id: str
    run_id: str | None = None


def scope_of(filters: dict[str, Any] | None, **top_level: str | None) -> Scope:
    """The one user (and optional run, dcpm's session) a request is about, from Mem0 `filters`
    (plain keys or an AND list) and top-level entity ids. dcpm keeps memories per user, so the
    filters must name exactly one user_id; OR, operators and agent/app scopes are refused."""
    terms = [(key, value) for key, value in top_level.items() if value is not None]
    terms += list(_filter_terms(filters or {}))
    values: dict[str, set[str]] = {}
    for key, value in terms:
        if value == WILDCARD:
            continue
        if key in UNSUPPORTED_SCOPES:
            raise Invalid(f"dcpm scopes memories by user_id (and run_id, as a session); {key} is not supported")
        if key not in ("user_id", "run_id"):
            raise Invalid(f"unsupported filter {key!r}: dcpm filters by user_id and run_id only")
        if not isinstance(value, str):
            raise Invalid(f"filter {key!r} must be a plain string; operators such as 'in' are not supported")
        values.setdefault(key, set()).add(value)
    users = values.get("user_id", set())
    runs = values.get("run_id", set())
    if len(users) != 1:
        raise Invalid("name exactly one user_id (in filters or at the top level): dcpm keeps memories per user")
    if len(runs) > 1:
        raise Invalid("name at most one run_id")
    return Scope(user_id=next(iter(users)), run_id=next(iter(runs), None))


def query_filters(text: str | None) -> dict[str, Any] | None:
    """`filters` sent as a query parameter: MemoryClient.delete_all puts the dict there, and httpx
    writes it as Python's repr, not JSON, so both are read (as literals only, never evaluated)."""
    if not text:
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        try:
            parsed = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise Invalid("filters must be a JSON object") from None
    if not isinstance(parsed, dict):
        raise Invalid("filters must be a JSON object")
    return parsed


def _filter_terms(filters: dict[str, Any]) -> Iterable[tuple[str, Any]]:
    for key, value in filters.items():
        if key == "AND":
            if not isinstance(value, list) or not all(isinstance(part, dict) for part in value):
                raise Invalid("AND takes a list of filter objects")
            for part in value:
                yield from _filter_terms(part)
        elif key in ("OR", "NOT"):
            raise Invalid(f"{key} filters are not supported: name one user_id")
        else:
            yield key, value


def dcpm_request(model: type[BaseModel], **fields: Any) -> Any:
    """Build one of dcpm's own request models, turning a validation failure into Invalid (a 422)."""
    try:
        return model(**fields)
    except ValidationError as exc:
        raise Invalid("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())) from None


# --- dcpm -> Mem0 ---------------------------------------------------------------------------------
def text_hash(text: str) -> str:
    """Mem0 clients compare memories by an MD5 of their text."""
    return hashlib.md5(text.encode()).hexdigest()


def memory_of(entry: ItemOut | RawOut) -> Mem0Memory:
    if isinstance(entry, RawOut):
        return Mem0Memory(id=entry.id, memory=entry.text, user_id=entry.user_id, run_id=entry.session_id,
                          hash=text_hash(entry.text), metadata=entry.metadata or None, created_at=entry.created_at,
                          kind="raw", valid_from=entry.timestamp)
    return Mem0Memory(id=entry.id, memory=entry.text, user_id=entry.user_id,
                      run_id=entry.metadata.get("session_id"), hash=text_hash(entry.text),
                      metadata=entry.metadata or None, categories=[entry.topic] if entry.topic else [],
                      created_at=entry.created_at, updated_at=entry.updated_at, kind=entry.kind,
                      current=entry.current, chain_id=entry.chain_id, supersedes=entry.supersedes,
                      superseded_by=entry.superseded_by, revision=entry.revision, valid_from=entry.valid_from,
                      valid_to=entry.valid_to, chain=entry.chain)


def memory_of_hit(hit: SearchHit, user_id: str) -> Mem0Memory:
    return Mem0Memory(id=hit.id, memory=hit.text, user_id=user_id, run_id=hit.session_id, hash=text_hash(hit.text),
                      metadata=hit.metadata or None, categories=[hit.topic] if hit.topic else [],
                      created_at=hit.created_at, score=hit.score, kind=hit.kind,
                      current=None if hit.kind == "raw" else hit.current is None, valid_from=hit.timestamp,
                      chain=hit.chain, believed_now=hit.current)


def search_results(hits: list[SearchHit], user_id: str, threshold: float | None, latest_only: bool) -> list[Mem0Memory]:
    """`threshold` drops weak hits; `latest_only` drops hits on revisions something has superseded."""
    return [memory_of_hit(hit, user_id) for hit in hits
            if (threshold is None or hit.score >= threshold) and not (latest_only and hit.current is not None)]


_ADD_EVENTS = {"ADD": "ADD", "SUPERSEDE": "UPDATE", "UPDATE": "UPDATE", "NONE": "NONE"}
_STATUSES = {"stored": "SUCCEEDED", "done": "SUCCEEDED", "pending": "PENDING", "failed": "FAILED"}


def add_response(result: AddMemoryResponse, infer: bool) -> Mem0AddResponse:
    """The memories an add produced. dcpm extracts while the request waits, so results are final
    (Mem0's platform answers PENDING and extracts later); without inference the turns themselves
    are the memories."""
    results = []
    for operation in result.operations:
        if operation.op == "RAW":
            if not infer:
                results.append(Mem0AddResult(id=operation.id, event="ADD", memory=operation.text, kind="raw"))
            continue
        memory_id = operation.target if operation.op == "NONE" and operation.target else operation.id
        results.append(Mem0AddResult(id=memory_id, event=_ADD_EVENTS[operation.op], memory=operation.text,
                                     previous_memory_id=operation.target if operation.op != "NONE" else None,
                                     kind=operation.kind))
    return Mem0AddResponse(message=result.message, status=_STATUSES[result.status], event_id=result.request_id,
                           results=results, raw_ids=result.raw_ids)


def history_entries(history: HistoryResponse, user_id: str) -> list[Mem0HistoryEntry]:
    """A chain's events as Mem0 history: creation is an ADD, an in-place update an UPDATE of the
    same memory, and a supersede an UPDATE of the old memory whose new text is its successor's."""
    texts: dict[str, str] = {}
    entries = []
    for event in history.events:
        detail = event.detail
        event_key = f"{event.item_id}/{event.at.isoformat()}/{event.action}"
        common = dict(id=str(uuid.uuid5(HISTORY_EVENT_NAMESPACE, event_key)), user_id=user_id, created_at=event.at,
                      updated_at=event.at, action=event.action, request_id=event.request_id)
        if detail.get("deleted"):
            entries.append(Mem0HistoryEntry(**common, memory_id=event.item_id, event="DELETE", old_memory=None,
                                            new_memory=None))
        elif event.action == "created":
            text, predecessor = detail.get("text"), detail.get("supersedes")
            if predecessor:
                entries.append(Mem0HistoryEntry(**common, memory_id=predecessor, event="UPDATE",
                                                old_memory=texts.get(predecessor), new_memory=text,
                                                successor_id=event.item_id))
            else:
                entries.append(Mem0HistoryEntry(**common, memory_id=event.item_id, event="ADD", old_memory=None,
                                                new_memory=text))
            texts[event.item_id] = text
        elif event.action == "updated":
            entries.append(Mem0HistoryEntry(**common, memory_id=event.item_id, event="UPDATE",
                                            old_memory=detail.get("before"), new_memory=detail.get("after")))
            texts[event.item_id] = detail.get("after")
    return entries


def entities_of(users: list[UserOut]) -> Mem0Entities:
    return Mem0Entities(count=len(users), results=[
        Mem0Entity(id=u.id, name=u.id, total_memories=u.items, created_at=u.created_at, updated_at=u.last_seen_at)
        for u in users])
