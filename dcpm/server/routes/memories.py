"""The calls an assistant makes: remember turns, search them, and the batches of `dcpm import`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from dcpm.api.models import (
    AddMemoryRequest,
    AddMemoryResponse,
    ImportBatch,
    ImportBatchResult,
    SearchRequest,
    SearchResponse,
)
from dcpm.auth import require_user
from dcpm.domain import Turn
from dcpm.server.caller import Caller
from dcpm.server.capacity import WaitingAdds
from dcpm.service import MemoryService


def memories_router(service: MemoryService, guarded: list[Any], waiting: WaitingAdds) -> APIRouter:
    router = APIRouter(dependencies=guarded)

    @router.post("/v1/memories", response_model=AddMemoryResponse, status_code=201, tags=["memories"],
                 responses={202: {"model": AddMemoryResponse}})
    def add_memory(request: AddMemoryRequest, caller: Caller) -> JSONResponse:
        """Remember turns. They are stored verbatim before anything else and searchable at once.
        While `max_waiting_adds` adds already wait for extraction, or the user's share of them
        (`max_waiting_adds_per_user`), this one does not (202)."""
        require_user(caller, request.user_id)
        with waiting.admit(request) as admitted:
            result = service.add_memory(admitted)
        status = 202 if result.status == "pending" else 201  # 202: stored, extraction still to come
        return JSONResponse(result.model_dump(mode="json"), status_code=status)

    @router.post("/v1/search", response_model=SearchResponse, tags=["memories"])
    def search(request: SearchRequest, caller: Caller) -> SearchResponse:
        """Hybrid search over one user's memories; never calls an LLM."""
        require_user(caller, request.user_id)
        return service.search(request)

    @router.post("/v1/import", response_model=ImportBatchResult, tags=["operations"])
    def import_batch(batch: ImportBatch, caller: Caller) -> ImportBatchResult:
        """One batch of `dcpm import`; ids are deterministic, so re-sent turns are skipped."""
        require_user(caller, batch.user_id)
        turns = [Turn(text=t.text, role=t.role, speaker=t.speaker, session_id=t.session_id, timestamp=t.timestamp,
                      metadata=t.metadata, id=t.id) for t in batch.turns]
        return ImportBatchResult(imported=service.import_turns(batch.user_id, turns))

    return router
