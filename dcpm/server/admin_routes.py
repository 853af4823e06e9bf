"""dcpm's own routes for changing stored memories by id: hard delete and text edits (see
dcpm.admin). The MCP server and dcpm.Client reach a daemon's data through these."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from dcpm.schemas import DeleteResponse, DeleteUserResponse, ItemOut, UpdateMemoryRequest
from dcpm.service import MemoryService


def admin_router(service: MemoryService, guarded: list[Any]) -> APIRouter:
    router = APIRouter(dependencies=guarded, tags=["memories"])

    @router.delete("/v1/items/{memory_id}", response_model=DeleteResponse)
    def delete_memory(memory_id: str, with_predecessors: bool = False) -> DeleteResponse:
        """Hard-delete an item or raw turn; the item's chain is linked around it, its events keep
        a tombstone. `with_predecessors` also deletes the revisions it superseded."""
        return service.delete_memory(memory_id, with_predecessors=with_predecessors)

    @router.patch("/v1/items/{memory_id}", response_model=ItemOut)
    def update_memory(memory_id: str, body: UpdateMemoryRequest) -> ItemOut:
        """New text for a current item, kept as an UPDATE revision; the vector is re-embedded."""
        return service.update_memory(memory_id, body.text)

    @router.delete("/v1/users/{user_id}", response_model=DeleteUserResponse)
    def delete_user(user_id: str) -> DeleteUserResponse:
        """Everything stored for a user, vectors included."""
        return service.delete_user(user_id)

    return router
