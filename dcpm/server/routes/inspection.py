"""Reading what is stored: users, a user's items or raw turns, one item with its history, a graph
node, and the event log. Nothing here changes the store."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query

from dcpm.api.models import (
    METADATA_FILTER_HELP,
    HistoryEvent,
    HistoryResponse,
    ItemOut,
    ListResponse,
    NodeOut,
    RawOut,
    UserOut,
    parse_metadata_filter,
)
from dcpm.auth import require_owner, require_user
from dcpm.domain import MAX_EVENTS
from dcpm.server.caller import Caller
from dcpm.service import MemoryService


def inspection_router(service: MemoryService, guarded: list[Any]) -> APIRouter:
    router = APIRouter(dependencies=guarded)

    @router.get("/v1/users", response_model=list[UserOut], tags=["inspection"])
    def users(caller: Caller) -> list[UserOut]:
        """Users with stored memories; an API key sees only its own user."""
        return service.users(only=caller.user_id)

    @router.get("/v1/users/{user_id}/items", response_model=ListResponse, tags=["inspection"])
    def items(user_id: str, caller: Caller, kind: str | None = None,
              limit: Annotated[int, Query(ge=1, le=1000)] = 50,
              offset: Annotated[int, Query(ge=0)] = 0, status: str | None = None, topic: str | None = None,
              since: datetime | None = None,
              metadata: Annotated[str | None, Query(description=METADATA_FILTER_HELP + " As JSON.")] = None,
              ) -> ListResponse:
        """A user's items and the turns not extracted into any (what search finds, each once); one
        item kind, every item (`kind=items`) or every raw turn (`kind=raw`); filter by status
        (current / superseded; for turns raw / pending / done / failed), topic, since, metadata."""
        require_user(caller, user_id)
        return service.list_memories(user_id, kind=kind, limit=limit, offset=offset, status=status, topic=topic,
                                     since=since, metadata=parse_metadata_filter(metadata))

    @router.get("/v1/items/{memory_id}", response_model=ItemOut | RawOut, tags=["inspection"])
    def item(memory_id: str, caller: Caller) -> ItemOut | RawOut:
        """One item with its chain and revisions, or one raw input."""
        require_owner(caller, service.owner_of(memory_id), memory_id)
        return service.get(memory_id)

    @router.get("/v1/items/{memory_id}/history", response_model=HistoryResponse, tags=["inspection"])
    def history(memory_id: str, caller: Caller) -> HistoryResponse:
        """Every event of an item and its chain: created, updated (before/after), superseded."""
        require_owner(caller, service.owner_of(memory_id), memory_id)
        return service.history(memory_id)

    @router.get("/v1/nodes/{node_id}", response_model=NodeOut, tags=["memories"])
    def node(node_id: str, caller: Caller) -> NodeOut:
        """A graph node with the items supporting it and its edges."""
        require_owner(caller, service.node_owner(node_id), node_id, what="graph node")
        return service.node(node_id)

    @router.get("/v1/users/{user_id}/events", response_model=list[HistoryEvent], tags=["memories"])
    def events(user_id: str, caller: Caller,
               limit: Annotated[int, Query(ge=1, le=MAX_EVENTS)] = 200) -> list[HistoryEvent]:
        """The user's event log, newest first; deleted subjects keep only tombstones."""
        require_user(caller, user_id)
        return service.events(user_id, limit)

    return router
