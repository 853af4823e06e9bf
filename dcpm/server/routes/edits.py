"""Changing stored memories by id: text edits and hard deletes of an item, a graph node, a session
or a whole user (see dcpm.admin). The MCP server and dcpm.Client reach a daemon's data through these."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from dcpm.api.models import DeleteResponse, DeleteUserResponse, ItemOut, UpdateMemoryRequest
from dcpm.auth import require_owner, require_user
from dcpm.errors import Forbidden
from dcpm.server.caller import Caller
from dcpm.service import MemoryService


def compaction(caller: Caller, compact: Annotated[bool, Query(description=(
        "Admin token only: answer only once the vector shard holds no byte of what was deleted. Compacting "
        "rewrites the shard every user shares and holds writes meanwhile, so an API key asking for it is refused "
        "(403) before anything is deleted; without it the daemon compacts on its own within "
        "compact_max_delay_seconds."))] = False) -> bool:
    """`compact`, refused to an API key: one tenant must not make the daemon rewrite every tenant's index
    on each delete. The scheduled compaction (dcpm.index.upkeep) bounds how long deleted bytes stay."""
    if compact and not caller.is_admin:
        raise Forbidden("compact=true rewrites the vector index every user shares, so it needs the admin token; "
                        "delete without it: the daemon removes the deleted points' bytes within "
                        "compact_max_delay_seconds on its own")
    return compact


Compact = Annotated[bool, Depends(compaction)]


def edits_router(service: MemoryService, guarded: list[Any]) -> APIRouter:
    router = APIRouter(dependencies=guarded, tags=["memories"])

    @router.delete("/v1/items/{memory_id}", response_model=DeleteResponse)
    def delete_memory(memory_id: str, caller: Caller, compact: Compact, with_predecessors: bool = False,
                      chain: bool = False) -> DeleteResponse:
        """Hard-delete an item or raw turn; the item's chain is linked around it, its events keep
        a tombstone. `with_predecessors` also deletes the revisions it superseded; `chain` deletes
        every revision of the belief."""
        require_owner(caller, service.owner_of(memory_id), memory_id)
        if chain:
            return service.delete_chain(memory_id, compact=compact)
        return service.delete_memory(memory_id, with_predecessors=with_predecessors, compact=compact)

    @router.delete("/v1/nodes/{node_id}", response_model=DeleteResponse)
    def delete_node(node_id: str, caller: Caller, compact: Compact) -> DeleteResponse:
        """A schema, intention or core-schema node with its edges; the facts stay."""
        require_owner(caller, service.node_owner(node_id), node_id, what="graph node")
        return service.delete_node(node_id, compact=compact)

    # `:path`: a session id may hold a slash, sent as %2F, which the server decodes before routing
    @router.delete("/v1/users/{user_id}/sessions/{session_id:path}", response_model=DeleteResponse)
    def delete_session(user_id: str, session_id: str, caller: Caller, compact: Compact) -> DeleteResponse:
        """Every turn of a session and every item extracted from them (a session id holding '/'
        is sent with it as %2F)."""
        require_user(caller, user_id)
        return service.delete_session(user_id, session_id, compact=compact)

    @router.patch("/v1/items/{memory_id}", response_model=ItemOut)
    def update_memory(memory_id: str, body: UpdateMemoryRequest, caller: Caller) -> ItemOut:
        """New text for a current item, kept as an UPDATE revision; the vector is re-embedded."""
        require_owner(caller, service.owner_of(memory_id), memory_id)
        return service.update_memory(memory_id, body.text)

    @router.delete("/v1/users/{user_id}", response_model=DeleteUserResponse)
    def delete_user(user_id: str, caller: Caller, compact: Compact) -> DeleteUserResponse:
        """Everything stored for a user, vectors included."""
        require_user(caller, user_id)
        return service.delete_user(user_id, compact=compact)

    return router
