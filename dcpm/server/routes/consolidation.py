"""System 2 over HTTP (DCPM 2.3): start a consolidation and follow its job and runs (admin), and a
user's consent to the inferred layers and the graph they produced."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from dcpm.api.models import ConsentOut, ConsentUpdate, ConsolidateRequest, GraphOut, JobOut, RunOut
from dcpm.auth import require_admin, require_user
from dcpm.server.caller import Caller
from dcpm.service import MemoryService


def consolidation_router(service: MemoryService, guarded: list[Any]) -> APIRouter:
    router = APIRouter(dependencies=guarded)

    @router.post("/v1/admin/consolidate", response_model=JobOut, status_code=202, tags=["consolidation"])
    def consolidate(request: ConsolidateRequest, caller: Caller) -> JobOut:
        """Start System 2 for one user or all users; the daemon keeps serving meanwhile."""
        require_admin(caller)
        return service.consolidate(request)

    @router.get("/v1/admin/consolidate/{job_id}", response_model=JobOut, tags=["consolidation"])
    def consolidation_job(job_id: str, caller: Caller) -> JobOut:
        """Progress of a consolidation job, read from its run records."""
        require_admin(caller)
        return service.consolidation_job(job_id)

    @router.get("/v1/admin/runs", response_model=list[RunOut], tags=["consolidation"])
    def runs(caller: Caller, user_id: str | None = None,
             limit: Annotated[int, Query(ge=1, le=1000)] = 50) -> list[RunOut]:
        require_admin(caller)
        return service.runs(user_id, limit)

    @router.get("/v1/users/{user_id}/consent", response_model=ConsentOut, tags=["consolidation"])
    def get_consent(user_id: str, caller: Caller) -> ConsentOut:
        require_user(caller, user_id)
        return service.consent(user_id)

    @router.put("/v1/users/{user_id}/consent", response_model=ConsentOut, tags=["consolidation"])
    def put_consent(user_id: str, update: ConsentUpdate, caller: Caller) -> ConsentOut:
        """Switch inferred layers on or off; a layer switched off disappears from search at once."""
        require_user(caller, user_id)
        return service.consent(user_id, update)

    @router.get("/v1/users/{user_id}/graph", response_model=GraphOut, tags=["consolidation"])
    def graph(user_id: str, caller: Caller) -> GraphOut:
        """The user's schemas, intentions and core schemas with evidence and edges."""
        require_user(caller, user_id)
        return service.graph(user_id)

    return router
