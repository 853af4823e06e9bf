"""Mem0 platform API on the daemon, so an application built on `mem0ai.MemoryClient(api_key=KEY,
host="http://127.0.0.1:8420")` works unchanged. The key is dcpm's admin token or a user-scoped
API key, which reaches its own user only (Mem0 sends `Authorization: Token <key>`, which dcpm's
auth accepts; any key while access control is off, see dcpm.auth).

Routes parse Mem0's shapes, call the service and render Mem0's shapes (dcpm.server.mem0.mapping);
errors are dcpm's, mapped once by the app. An entity Mem0 has never seen reads as empty, as on
Mem0's platform, instead of dcpm's 404 for an unknown user.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from fastapi import APIRouter, Query, Request

from dcpm import __version__
from dcpm.auth import require_owner, require_user
from dcpm.errors import Invalid, NotFound
from dcpm.server.caller import Caller
from dcpm.server.capacity import WaitingAdds
from dcpm.server.mem0.filters import owner_id
from dcpm.server.mem0.mapping import (
    add_request,
    add_response,
    entities_of,
    history_entries,
    listing_status,
    memory_of,
    query_filters,
    request_scope,
    scope_of,
    search_request,
    search_results,
)
from dcpm.server.mem0.models import (
    Mem0AddRequest,
    Mem0AddResponse,
    Mem0Deleted,
    Mem0DeletedAll,
    Mem0Entities,
    Mem0HistoryEntry,
    Mem0ListRequest,
    Mem0Memory,
    Mem0Page,
    Mem0Ping,
    Mem0SearchRequest,
    Mem0SearchResponse,
    Mem0Updated,
    Mem0UpdateRequest,
)
from dcpm.service import MemoryService

T = TypeVar("T")


def unless_unknown_user(call: Callable[[], T], empty: T) -> T:
    """Mem0 answers an empty result for an entity with no memories; dcpm's service says NotFound."""
    try:
        return call()
    except NotFound:
        return empty


def page_url(request: Request, page: int, page_size: int) -> str:
    return str(request.url.include_query_params(page=page, page_size=page_size))


def mem0_router(service: MemoryService, guarded: list[Any], waiting: WaitingAdds) -> APIRouter:
    router = APIRouter(dependencies=guarded, tags=["mem0 compatibility"])

    @router.get("/v1/ping/", response_model=Mem0Ping)
    def ping() -> Mem0Ping:
        """What MemoryClient calls on construction to check its key."""
        return Mem0Ping(message=f"dcpm {__version__}")

    @router.post("/v3/memories/add/", response_model=Mem0AddResponse)
    def add(body: Mem0AddRequest, caller: Caller) -> Mem0AddResponse:
        """Remember messages; with `infer` (default) facts are extracted before the answer, unless
        `max_waiting_adds` adds, or the user's `max_waiting_adds_per_user`, already wait (then
        PENDING, extracted in the background)."""
        scope = request_scope(body)
        require_user(caller, scope.user_id)
        with waiting.admit(add_request(body, scope)) as request:
            return add_response(service.add_memory(request), body.infer)

    @router.post("/v3/memories/", response_model=Mem0Page)
    def get_all(body: Mem0ListRequest, request: Request, caller: Caller, page: int = Query(1, ge=1),
                page_size: int = Query(100, ge=1, le=1000)) -> Mem0Page:
        """A user's memories, oldest first, superseded revisions included unless `latest_only`: the
        items and the turns not (or not yet) extracted into items, what search finds, each once."""
        scope = request_scope(body)
        require_user(caller, scope.user_id)
        if scope.run_id:
            raise Invalid("listing by run_id is not supported; search with a run_id filter instead")
        offset = (page - 1) * page_size
        listing = unless_unknown_user(lambda: service.list_memories(
            scope.user_id, kind=body.kind, limit=page_size, offset=offset, status=listing_status(body),
            metadata=scope.metadata), None)
        if listing is None:
            return Mem0Page(count=0, results=[])
        more = offset + len(listing.items) < listing.total
        return Mem0Page(count=listing.total, results=[memory_of(entry) for entry in listing.items],
                        next=page_url(request, page + 1, page_size) if more else None,
                        previous=page_url(request, page - 1, page_size) if page > 1 else None)

    @router.post("/v3/memories/search/", response_model=Mem0SearchResponse)
    def search(body: Mem0SearchRequest, caller: Caller) -> Mem0SearchResponse:
        """Hybrid search (no LLM); each result carries dcpm's chain, and `nodes` the schemas and
        intentions the hits surfaced."""
        scope = request_scope(body)
        require_user(caller, scope.user_id)
        if body.top_k > service.settings.max_search_limit:  # said here, as the search would say it of `limit`
            raise Invalid(f"top_k {body.top_k} is above the maximum of {service.settings.max_search_limit}")
        request = search_request(body, scope)
        found = unless_unknown_user(lambda: service.search(request), None)
        if found is None:
            return Mem0SearchResponse(results=[])
        return Mem0SearchResponse(results=search_results(found.hits, scope.user_id, body.latest_only),
                                  nodes=found.nodes, context=found.context)

    @router.get("/v1/memories/{memory_id}/", response_model=Mem0Memory)
    def get(memory_id: str, caller: Caller) -> Mem0Memory:
        require_owner(caller, service.owner_of(memory_id), memory_id)
        return memory_of(service.get(memory_id))

    @router.put("/v1/memories/{memory_id}/", response_model=Mem0Updated)
    def update(memory_id: str, body: Mem0UpdateRequest, caller: Caller) -> Mem0Updated:
        """New text as an UPDATE revision: the previous text stays in the history."""
        require_owner(caller, service.owner_of(memory_id), memory_id)
        if body.text is None:
            raise Invalid("dcpm edits a memory's text only: send `text`")
        if asked := sorted(name for name, value in (body.model_extra or {}).items() if value is not None):
            raise Invalid(f"dcpm edits a memory's text only and cannot change its {', '.join(asked)}: "
                          "send `text` alone; nothing was changed")
        return Mem0Updated(**memory_of(service.update_memory(memory_id, body.text)).model_dump())

    @router.delete("/v1/memories/{memory_id}/", response_model=Mem0Deleted)
    def delete(memory_id: str, caller: Caller, delete_linked: bool = False) -> Mem0Deleted:
        """Hard delete; `delete_linked` also deletes the revisions this memory superseded."""
        require_owner(caller, service.owner_of(memory_id), memory_id)
        return Mem0Deleted(**service.delete_memory(memory_id, with_predecessors=delete_linked).model_dump())

    @router.get("/v1/memories/{memory_id}/history/", response_model=list[Mem0HistoryEntry])
    def history(memory_id: str, caller: Caller) -> list[Mem0HistoryEntry]:
        """The memory's whole supersedes chain: ADD, then UPDATEs (in place or by a successor)."""
        owner = service.owner_of(memory_id)
        require_owner(caller, owner, memory_id)
        return history_entries(service.history(memory_id), owner)

    @router.delete("/v1/memories/", response_model=Mem0DeletedAll)
    def delete_all(caller: Caller, user_id: str | None = None, run_id: str | None = None,
                   agent_id: str | None = None, app_id: str | None = None,
                   filters: str | None = None) -> Mem0DeletedAll:
        """Everything of one owner, a user or an agent or app of its own (never without one)."""
        scope = scope_of(query_filters(filters), user_id=user_id, run_id=run_id, agent_id=agent_id, app_id=app_id)
        require_user(caller, scope.user_id)
        if scope.run_id or scope.metadata:
            raise Invalid("deleting by run_id, agent_id or app_id within an owner, or by metadata, is not "
                          "supported; delete all of an owner's memories or one memory")
        nothing = Mem0DeletedAll(user_id=scope.user_id, raw_inputs=0, items=0, nodes=0, events_redacted=0)
        return unless_unknown_user(lambda: Mem0DeletedAll(**service.delete_user(scope.user_id).model_dump()), nothing)

    @router.get("/v1/entities/", response_model=Mem0Entities)
    def entities(caller: Caller) -> Mem0Entities:
        """Owners with memories: users, and agents and apps with memories of their own; an API key
        sees its own user."""
        return entities_of(service.users(only=caller.user_id))

    @router.delete("/v2/entities/{entity_type}/{name}/", response_model=Mem0DeletedAll)
    def delete_entity(entity_type: str, name: str, caller: Caller) -> Mem0DeletedAll:
        """MemoryClient.delete_users and reset come here, one entity (user, agent or app) at a time."""
        if entity_type not in ("user", "agent", "app"):
            raise Invalid(f"dcpm's entities are users, agents and apps, no {entity_type} entities")
        owner = owner_id(f"{entity_type}_id", name)
        require_user(caller, owner)
        return Mem0DeletedAll(**service.delete_user(owner).model_dump(), message="Entity deleted successfully!")

    return router

