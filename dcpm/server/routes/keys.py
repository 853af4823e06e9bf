"""API key management (dcpm.auth): admin only. `dcpm keys` uses these when a daemon serves the
data directory, and opens the store itself otherwise."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from dcpm.api.models import ApiKeyOut, CreateKeyRequest, NewApiKey
from dcpm.auth import require_admin
from dcpm.server.caller import Caller
from dcpm.service import MemoryService


def keys_router(service: MemoryService, guarded: list[Any]) -> APIRouter:
    router = APIRouter(dependencies=guarded, tags=["access control"])

    @router.post("/v1/admin/keys", response_model=NewApiKey, status_code=201)
    def create_key(body: CreateKeyRequest, caller: Caller) -> NewApiKey:
        """A key that acts for one user; the answer holds the key itself, which is never shown again."""
        require_admin(caller)
        return service.create_key(body.user_id, body.label)

    @router.get("/v1/admin/keys", response_model=list[ApiKeyOut])
    def api_keys(caller: Caller, user_id: str | None = None) -> list[ApiKeyOut]:
        """Every key (or one user's), revoked ones included; never the keys themselves."""
        require_admin(caller)
        return service.api_keys(user_id)

    @router.delete("/v1/admin/keys/{key_ref}", response_model=ApiKeyOut)
    def revoke_key(key_ref: str, caller: Caller) -> ApiKeyOut:
        """Revoke a key by its id or prefix; it is refused from the next request on."""
        require_admin(caller)
        return service.revoke_key(key_ref)

    return router
