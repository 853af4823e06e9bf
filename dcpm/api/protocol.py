"""The `Memory` contract: every operation the surfaces (CLI, MCP server, admin page through the
HTTP API) call. `dcpm.service.MemoryService` implements it on a store opened in this process,
`dcpm.api.client.Client` on a daemon's; a surface never asks which one it holds."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Callable, Protocol

from dcpm.api.models import (
    AddMemoryRequest,
    AddMemoryResponse,
    ApiKeyOut,
    ConsentOut,
    ConsentUpdate,
    ConsolidateRequest,
    DeleteResponse,
    DeleteUserResponse,
    GraphOut,
    HistoryEvent,
    HistoryResponse,
    ItemOut,
    JobOut,
    ListResponse,
    MetadataFilter,
    NewApiKey,
    NodeOut,
    RawOut,
    RunOut,
    SearchRequest,
    SearchResponse,
    UserOut,
)
from dcpm.domain import Turn

Progress = Callable[[int, int], None]  # (done, total) of a long operation


class Memory(Protocol):
    # --- the two calls an assistant makes ---------------------------------------------------
    def add_memory(self, request: AddMemoryRequest) -> AddMemoryResponse: ...

    def search(self, request: SearchRequest) -> SearchResponse: ...

    def import_turns(self, user_id: str, turns: list[Turn]) -> int: ...

    # --- inspection -------------------------------------------------------------------------
    def list_memories(self, user_id: str, kind: str | None = None, limit: int = 50, offset: int = 0,
                      status: str | None = None, topic: str | None = None, since: datetime | None = None,
                      metadata: MetadataFilter | None = None) -> ListResponse: ...

    def get(self, memory_id: str) -> ItemOut | RawOut: ...

    def history(self, memory_id: str) -> HistoryResponse: ...

    def node(self, node_id: str) -> NodeOut: ...

    def users(self) -> list[UserOut]: ...

    def events(self, user_id: str, limit: int = 200) -> list[HistoryEvent]: ...

    # --- edits and hard deletes -------------------------------------------------------------
    def update_memory(self, memory_id: str, text: str) -> ItemOut: ...

    # `compact`: return only once the vector shard holds no byte of what was deleted.
    def delete_memory(self, memory_id: str, with_predecessors: bool = False, compact: bool = False) -> DeleteResponse: ...

    def delete_chain(self, memory_id: str, compact: bool = False) -> DeleteResponse: ...

    def delete_node(self, node_id: str, compact: bool = False) -> DeleteResponse: ...

    def delete_session(self, user_id: str, session_id: str, compact: bool = False) -> DeleteResponse: ...

    def delete_user(self, user_id: str, compact: bool = False) -> DeleteUserResponse: ...

    # --- System 2 ---------------------------------------------------------------------------
    def consolidate(self, request: ConsolidateRequest) -> JobOut: ...

    def consolidation_job(self, job_id: str) -> JobOut: ...

    def runs(self, user_id: str | None = None, limit: int = 50) -> list[RunOut]: ...

    def consent(self, user_id: str, update: ConsentUpdate | None = None) -> ConsentOut: ...

    def graph(self, user_id: str) -> GraphOut: ...

    # --- operations -------------------------------------------------------------------------
    def backfill(self, progress: Progress | None = None, retry_failed: bool = False) -> int: ...

    def reindex(self, progress: Progress | None = None) -> int: ...

    def export_user(self, user_id: str, path: Path) -> dict: ...

    def restore(self, path: Path) -> dict: ...

    def health(self) -> dict: ...

    # --- access control (admin) -------------------------------------------------------------
    def create_key(self, user_id: str, label: str | None = None) -> NewApiKey: ...

    def api_keys(self, user_id: str | None = None) -> list[ApiKeyOut]: ...

    def revoke_key(self, key_ref: str) -> ApiKeyOut: ...

    def close(self) -> None: ...
