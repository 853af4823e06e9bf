"""Mem0 platform API shapes, as the `mem0ai` MemoryClient sends and reads them. Wire models only:
their mapping onto dcpm's own shapes is in dcpm.server.mem0.mapping. dcpm's own fields (kind,
chain, current, ...) ride along as extra fields, which Mem0 clients ignore.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from dcpm.api.models import ChainLink, DeleteResponse, DeleteUserResponse, NodeHit
from dcpm.domain import SEARCH_KINDS, ItemKind


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


class Mem0AddRequest(Mem0Scoped):
    messages: list[Mem0Message]
    metadata: dict[str, Any] | None = None
    infer: bool = True
    timestamp: datetime | None = None  # Unix time as Mem0 sends it, read as dcpm's own API reads it


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
    user_id: str | None = None  # None for an agent's or an app's own memories
    agent_id: str | None = None
    app_id: str | None = None
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
    type: Literal["user", "agent", "app"] = "user"
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
