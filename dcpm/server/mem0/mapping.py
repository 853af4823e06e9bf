"""Mem0's requests read as dcpm's, and dcpm's answers written as Mem0's. Pure functions over plain
data: the routes parse, call the service and render with these.

The mapping, in short: a Mem0 "memory" is a dcpm item (fact, identity, summary); search also
returns the verbatim turns dcpm recalls from (kind "raw"), and with `infer: false` those turns are
what an add stores. Mem0's `user_id` is dcpm's user and `run_id` its session. A revision that
superseded another appears in `history` as an UPDATE of the old memory by its successor.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from pydantic import BaseModel, ValidationError

from dcpm.api.models import (
    AddMemoryRequest,
    AddMemoryResponse,
    HistoryResponse,
    ItemOut,
    RawOut,
    SearchHit,
    SearchRequest,
    UserOut,
)
from dcpm.domain import ItemKind, Op
from dcpm.errors import invalid_from
from dcpm.server.mem0.filters import RECORDED_AS, Scope, entities_of_owner, query_filters, recorded, scope_of
from dcpm.server.mem0.models import (
    Mem0AddRequest,
    Mem0AddResponse,
    Mem0AddResult,
    Mem0Entities,
    Mem0Entity,
    Mem0HistoryEntry,
    Mem0ListRequest,
    Mem0Memory,
    Mem0Scoped,
    Mem0SearchRequest,
)
from dcpm.store.events import item_change
from dcpm.stored_values import OWN_PREFIX

__all__ = ["Scope", "query_filters", "scope_of"]  # the routes read scopes through this module

HISTORY_EVENT_NAMESPACE = uuid.UUID("0c3b4f3e-9d0a-4b8e-8f7e-3d1c6a2b5e47")


# --- Mem0 -> dcpm ---------------------------------------------------------------------------------
def request_scope(body: Mem0Scoped) -> Scope:
    """Entity ids may come at the top level (REST callers) or inside `filters` (the 2.x client)."""
    return scope_of(body.filters, user_id=body.user_id, run_id=body.run_id, agent_id=body.agent_id,
                    app_id=body.app_id)


def add_request(body: Mem0AddRequest, scope: Scope) -> AddMemoryRequest:
    return _dcpm_request(AddMemoryRequest, user_id=scope.user_id, session_id=scope.run_id,
                         timestamp=body.timestamp,
                         messages=[m.model_dump(include={"role", "content", "name"}) for m in body.messages],
                         metadata=body.metadata or {}, infer=body.infer).recording(recorded(scope.namespace))


def search_request(body: Mem0SearchRequest, scope: Scope) -> SearchRequest:
    return _dcpm_request(SearchRequest, user_id=scope.user_id, query=body.query, limit=body.top_k,
                         session_id=scope.run_id, kinds=body.kinds, filters=scope.metadata, threshold=body.threshold)


def listing_status(body: Mem0ListRequest) -> str | None:
    """`latest_only` lists the revisions nothing superseded, filtered in the query so pages stay
    full; raw turns have no revisions, so it leaves them alone."""
    return "current" if body.latest_only and body.kind != ItemKind.RAW else None


MEM0_FIELDS = {"limit": "top_k", "session_id": "run_id"}  # dcpm's request fields read from Mem0's others


def _dcpm_request(model: type[BaseModel], **fields: Any) -> Any:
    """Build one of dcpm's own request models, turning a validation failure into Invalid (a 422)
    that names the fields as the Mem0 client sent them."""
    try:
        return model(**fields)
    except ValidationError as exc:
        raise invalid_from([{**error, "loc": tuple(MEM0_FIELDS.get(part, part) for part in error["loc"])}
                            for error in exc.errors()]) from None


# --- dcpm -> Mem0 ---------------------------------------------------------------------------------
def text_hash(text: str) -> str:
    """Mem0 clients compare memories by an MD5 of their text."""
    return hashlib.md5(text.encode()).hexdigest()


def entities(owner: str, metadata: dict[str, Any]) -> dict[str, str | None]:
    """Mem0's entity fields of a memory: its owner as a user, agent or app, and the agent and app
    namespaces dcpm recorded in its metadata (never a client's own `agent_id` key: see shown)."""
    found: dict[str, str | None] = {key: value if isinstance(value := metadata.get(stored), str) else None
                                    for key, stored in RECORDED_AS.items()}
    entity, name = entities_of_owner(owner)
    return {**found, "user_id": None, entity: name}


def shown(metadata: dict[str, Any]) -> dict[str, Any] | None:
    """The metadata the client gave: what dcpm records itself is shown as entity fields instead."""
    return {key: value for key, value in metadata.items() if not key.startswith(OWN_PREFIX)} or None


def memory_of(entry: ItemOut | RawOut) -> Mem0Memory:
    if isinstance(entry, RawOut):
        return Mem0Memory(id=entry.id, memory=entry.text, **entities(entry.user_id, entry.metadata),
                          run_id=entry.session_id, hash=text_hash(entry.text), metadata=shown(entry.metadata),
                          created_at=entry.created_at, kind=ItemKind.RAW, valid_from=entry.timestamp)
    return Mem0Memory(id=entry.id, memory=entry.text, **entities(entry.user_id, entry.metadata),
                      run_id=entry.metadata.get("session_id"), hash=text_hash(entry.text),
                      metadata=shown(entry.metadata), categories=[entry.topic] if entry.topic else [],
                      created_at=entry.created_at, updated_at=entry.updated_at, kind=entry.kind,
                      current=entry.current, chain_id=entry.chain_id, supersedes=entry.supersedes,
                      superseded_by=entry.superseded_by, revision=entry.revision, valid_from=entry.valid_from,
                      valid_to=entry.valid_to, chain=entry.chain)


def memory_of_hit(hit: SearchHit, user_id: str) -> Mem0Memory:
    return Mem0Memory(id=hit.id, memory=hit.text, **entities(user_id, hit.metadata), run_id=hit.session_id,
                      hash=text_hash(hit.text), metadata=shown(hit.metadata), score=hit.score, kind=hit.kind,
                      categories=[hit.topic] if hit.topic else [], created_at=hit.created_at,
                      current=None if hit.kind == ItemKind.RAW else hit.current is None, valid_from=hit.timestamp,
                      chain=hit.chain, believed_now=hit.current)


def search_results(hits: list[SearchHit], user_id: str, latest_only: bool) -> list[Mem0Memory]:
    """`latest_only` drops hits on revisions something has superseded (a `threshold` was already
    applied by the search itself, see `search_request`)."""
    return [memory_of_hit(hit, user_id) for hit in hits if not (latest_only and hit.current is not None)]


_ADD_EVENTS = {Op.ADD: "ADD", Op.SUPERSEDE: "UPDATE", Op.UPDATE: "UPDATE", Op.NONE: "NONE"}
_STATUSES = {"stored": "SUCCEEDED", "done": "SUCCEEDED", "pending": "PENDING", "failed": "FAILED"}


def add_response(result: AddMemoryResponse, infer: bool) -> Mem0AddResponse:
    """The memories an add produced. dcpm extracts while the request waits, so results are final
    (Mem0's platform answers PENDING and extracts later); without inference the turns themselves
    are the memories."""
    results = []
    for operation in result.operations:
        if operation.op == Op.RAW:
            if not infer:
                results.append(Mem0AddResult(id=operation.id, event="ADD", memory=operation.text, kind=ItemKind.RAW))
            continue
        memory_id = operation.target if operation.op == Op.NONE and operation.target else operation.id
        results.append(Mem0AddResult(id=memory_id, event=_ADD_EVENTS[operation.op], memory=operation.text,
                                     previous_memory_id=operation.target if operation.op != Op.NONE else None,
                                     kind=operation.kind))
    return Mem0AddResponse(message=result.message, status=_STATUSES[result.status], event_id=result.request_id,
                           results=results, raw_ids=result.raw_ids)


def history_entries(history: HistoryResponse, user_id: str) -> list[Mem0HistoryEntry]:
    """A chain's events as Mem0 history: creation is an ADD, an in-place update an UPDATE of the
    same memory, and a supersede an UPDATE of the old memory whose new text is its successor's."""
    texts: dict[str, str | None] = {}
    entries = []
    for event in history.events:
        change = item_change(event.action, event.item_id, event.at, event.request_id, event.detail)
        event_key = f"{change.item_id}/{change.at.isoformat()}/{change.action}"
        common = dict(id=str(uuid.uuid5(HISTORY_EVENT_NAMESPACE, event_key)), user_id=user_id, created_at=change.at,
                      updated_at=change.at, action=change.action, request_id=change.request_id)
        if change.deleted:
            entries.append(Mem0HistoryEntry(**common, memory_id=change.item_id, event="DELETE", old_memory=None,
                                            new_memory=None))
        elif change.op == Op.SUPERSEDE:
            entries.append(Mem0HistoryEntry(**common, memory_id=change.supersedes, event="UPDATE",
                                            old_memory=texts.get(change.supersedes), new_memory=change.text,
                                            successor_id=change.item_id))
        elif change.op == Op.ADD:
            entries.append(Mem0HistoryEntry(**common, memory_id=change.item_id, event="ADD", old_memory=None,
                                            new_memory=change.text))
        elif change.op == Op.UPDATE:
            entries.append(Mem0HistoryEntry(**common, memory_id=change.item_id, event="UPDATE",
                                            old_memory=change.before, new_memory=change.text))
        if change.op is not None:
            texts[change.item_id] = change.text
    return entries


def entities_of(users: list[UserOut]) -> Mem0Entities:
    """Owners as Mem0 entities: users, and agents and apps with memories of their own."""
    return Mem0Entities(count=len(users), results=[
        Mem0Entity(id=u.id, name=name, type=entity.removesuffix("_id"), total_memories=u.memories or 0,
                   created_at=u.created_at, updated_at=u.last_seen_at)
        for u in users for entity, name in [entities_of_owner(u.id)]])
