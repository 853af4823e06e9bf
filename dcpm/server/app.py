"""HTTP routes: parse, call the service, render. No business logic lives here."""

from __future__ import annotations

import inspect
import logging
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Annotated

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.base import BaseHTTPMiddleware

from dcpm import __version__
from dcpm.auth import require_admin, require_owner, require_user
from dcpm.errors import DcpmError, Invalid
from dcpm.domain import Turn
from dcpm.api.models import (
    AddMemoryRequest,
    AddMemoryResponse,
    ConsentOut,
    ConsentUpdate,
    ConsolidateRequest,
    GraphOut,
    JobOut,
    RunOut,
    HistoryResponse,
    ImportBatch,
    ImportBatchResult,
    ItemOut,
    ListResponse,
    RawOut,
    SearchRequest,
    SearchResponse,
    UserOut,
)
from dcpm.server.routes.edits import admin_router
from dcpm.server.caller import Caller, current_principal
from dcpm.server.routes.keys import key_router
from dcpm.server.mem0.routes import mem0_router
from dcpm.service import MemoryService

log = logging.getLogger("dcpm.server")
ADMIN_PAGE = Path(__file__).parent / "static" / "admin.html"


def error_body(code: str, message: str) -> dict:
    return {"error": code, "message": message}


class BodyLimit(BaseHTTPMiddleware):
    """Refuse oversized bodies before they are read into memory."""

    def __init__(self, app, max_bytes: int):  # type: ignore[no-untyped-def]
        super().__init__(app)
        self.max_bytes = max_bytes

    async def dispatch(self, request: Request, call_next):  # type: ignore[no-untyped-def]
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            return JSONResponse(error_body("too_large", f"request body over {self.max_bytes} bytes"), status_code=413)
        return await call_next(request)


def telemetry_off() -> dict:
    """Newer FastAPI releases instrument apps with OpenTelemetry; dcpm sends nothing anywhere."""
    if "telemetry" not in inspect.signature(FastAPI).parameters:
        return {}
    return {"telemetry": {"tracing": False, "metrics": False, "logs": False, "operation_spans": False,
                          "auto_configure": False}}


def create_app(service: MemoryService) -> FastAPI:
    settings = service.settings
    app = FastAPI(title="dcpm", version=__version__,
                  description="Long-term memory for LLM assistants: raw turns, facts with supersedes chains, "
                              "LLM-free hybrid search.", **telemetry_off())
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.state.service = service  # read by dcpm.server.caller to authenticate each request

    @app.exception_handler(DcpmError)
    async def _dcpm_error(_: Request, exc: DcpmError) -> JSONResponse:
        return JSONResponse(error_body(exc.code, exc.message), status_code=exc.http_status)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(error_body("http_error", str(exc.detail)), status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error.get("loc", ()) if part != "body")
            problems.append(f"{where}: {error.get('msg')}" if where else str(error.get("msg")))
        return JSONResponse(error_body("invalid", "; ".join(problems) or "invalid request"), status_code=422)

    # Every route but /healthz, the /admin page shell and the OpenAPI pages needs a credential once
    # access control is on (dcpm.auth); each route then checks the caller's scope in one line.
    guarded = [Depends(current_principal)]

    @app.get("/healthz", tags=["operations"])
    def healthz() -> dict:
        """Store, index, embedder and LLM reachability."""
        return service.health()

    @app.post("/v1/memories", response_model=AddMemoryResponse, status_code=201, dependencies=guarded,
              tags=["memories"], responses={202: {"model": AddMemoryResponse}})
    def add_memory(request: AddMemoryRequest, caller: Caller) -> JSONResponse:
        """Remember turns. They are stored verbatim before anything else and searchable at once."""
        require_user(caller, request.user_id)
        result = service.add_memory(request)
        status = 202 if result.status == "pending" else 201  # 202: stored, extraction still to come
        return JSONResponse(result.model_dump(mode="json"), status_code=status)

    @app.post("/v1/search", response_model=SearchResponse, dependencies=guarded, tags=["memories"])
    def search(request: SearchRequest, caller: Caller) -> SearchResponse:
        """Hybrid search over one user's memories; never calls an LLM."""
        require_user(caller, request.user_id)
        return service.search(request)

    @app.get("/v1/users", response_model=list[UserOut], dependencies=guarded, tags=["inspection"])
    def users(caller: Caller) -> list[UserOut]:
        """Users with stored memories; an API key sees only its own user."""
        return service.users(only=caller.user_id)

    @app.get("/v1/users/{user_id}/items", response_model=ListResponse, dependencies=guarded, tags=["inspection"])
    def items(user_id: str, caller: Caller, kind: str | None = None,
              limit: Annotated[int, Query(ge=1, le=1000)] = 50,
              offset: Annotated[int, Query(ge=0)] = 0, status: str | None = None, topic: str | None = None,
              since: datetime | None = None) -> ListResponse:
        """A user's items (facts, identity, summaries), or raw inputs with `kind=raw`; filter by
        status (current / superseded; for turns raw / pending / done / failed), topic, since."""
        require_user(caller, user_id)
        return service.list_memories(user_id, kind=kind, limit=limit, offset=offset, status=status, topic=topic,
                                     since=since)

    @app.get("/v1/items/{memory_id}", response_model=ItemOut | RawOut, dependencies=guarded, tags=["inspection"])
    def item(memory_id: str, caller: Caller) -> ItemOut | RawOut:
        """One item with its chain and revisions, or one raw input."""
        require_owner(caller, service.owner_of(memory_id), memory_id)
        return service.get(memory_id)

    @app.get("/v1/items/{memory_id}/history", response_model=HistoryResponse, dependencies=guarded,
             tags=["inspection"])
    def history(memory_id: str, caller: Caller) -> HistoryResponse:
        """Every event of an item and its chain: created, updated (before/after), superseded."""
        require_owner(caller, service.owner_of(memory_id), memory_id)
        return service.history(memory_id)

    @app.post("/v1/import", response_model=ImportBatchResult, dependencies=guarded, tags=["operations"])
    def import_batch(batch: ImportBatch, caller: Caller) -> ImportBatchResult:
        """One batch of `dcpm import`; ids are deterministic, so re-sent turns are skipped."""
        require_user(caller, batch.user_id)
        turns = [Turn(text=t.text, role=t.role, speaker=t.speaker, session_id=t.session_id, timestamp=t.timestamp,
                      metadata=t.metadata, id=t.id) for t in batch.turns]
        return ImportBatchResult(imported=service.import_turns(batch.user_id, turns))

    @app.post("/v1/admin/reindex", dependencies=guarded, tags=["operations"])
    def reindex(caller: Caller) -> dict:
        """Rebuild the vector index from the relational store."""
        require_admin(caller)
        return {"points": service.reindex()}

    @app.post("/v1/admin/backfill", dependencies=guarded, tags=["operations"])
    def backfill(caller: Caller) -> dict:
        """Process every pending input now (after an LLM was configured)."""
        require_admin(caller)
        return {"processed": service.backfill()}

    @app.post("/v1/admin/consolidate", response_model=JobOut, status_code=202, dependencies=guarded,
              tags=["consolidation"])
    def consolidate(request: ConsolidateRequest, caller: Caller) -> JobOut:
        """Start System 2 for one user or all users; the daemon keeps serving meanwhile."""
        require_admin(caller)
        return service.consolidate(request)

    @app.get("/v1/admin/consolidate/{job_id}", response_model=JobOut, dependencies=guarded, tags=["consolidation"])
    def consolidation_job(job_id: str, caller: Caller) -> JobOut:
        """Progress of a consolidation job, read from its run records."""
        require_admin(caller)
        return service.consolidation_job(job_id)

    @app.get("/v1/admin/runs", response_model=list[RunOut], dependencies=guarded, tags=["consolidation"])
    def runs(caller: Caller, user_id: str | None = None,
             limit: Annotated[int, Query(ge=1, le=1000)] = 50) -> list[RunOut]:
        require_admin(caller)
        return service.runs(user_id, limit)

    @app.get("/v1/users/{user_id}/consent", response_model=ConsentOut, dependencies=guarded, tags=["consolidation"])
    def get_consent(user_id: str, caller: Caller) -> ConsentOut:
        require_user(caller, user_id)
        return service.consent(user_id)

    @app.put("/v1/users/{user_id}/consent", response_model=ConsentOut, dependencies=guarded, tags=["consolidation"])
    def put_consent(user_id: str, update: ConsentUpdate, caller: Caller) -> ConsentOut:
        """Switch inferred layers on or off; a layer switched off disappears from search at once."""
        require_user(caller, user_id)
        return service.consent(user_id, update)

    @app.get("/v1/users/{user_id}/graph", response_model=GraphOut, dependencies=guarded, tags=["consolidation"])
    def graph(user_id: str, caller: Caller) -> GraphOut:
        """The user's schemas, intentions and core schemas with evidence and edges."""
        require_user(caller, user_id)
        return service.graph(user_id)

    @app.get("/v1/admin/users/{user_id}/export", dependencies=guarded, tags=["admin"],
             response_class=Response, responses={200: {"content": {"application/x-ndjson": {}}}})
    def export_user(user_id: str, caller: Caller) -> Response:
        """Everything of a user as JSONL (first line: the manifest), for `dcpm restore` elsewhere.
        An API key may export its own user."""
        require_user(caller, user_id)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "export.jsonl"
            service.export_user(user_id, path)
            return Response(path.read_bytes(), media_type="application/x-ndjson")

    @app.post("/v1/admin/restore", dependencies=guarded, tags=["admin"],
              openapi_extra={"requestBody": {"content": {"text/plain": {"schema": {"type": "string"}}},
                                             "required": True}})
    async def restore(request: Request, caller: Caller) -> dict:
        """Load an export produced by `dcpm export` into this store."""
        require_admin(caller)
        body = await request.body()
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "restore.jsonl"
            path.write_bytes(body)
            try:
                path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                raise Invalid("the export is not UTF-8 text") from None
            return await run_in_threadpool(service.restore, path)

    @app.get("/admin", response_class=HTMLResponse, include_in_schema=False)
    def admin_page() -> HTMLResponse:
        """Read-only inspection page; it fetches everything through this API with the admin token."""
        return HTMLResponse(ADMIN_PAGE.read_text(encoding="utf-8"),
                            headers={"Content-Security-Policy": "default-src 'self'; script-src 'unsafe-inline'; "
                                                                "style-src 'unsafe-inline'; connect-src 'self'"})

    @app.get("/metrics", dependencies=guarded, tags=["operations"], include_in_schema=False)
    def metrics(caller: Caller) -> Response:
        """Prometheus metrics; a scraper sends the admin token once access control is on."""
        require_admin(caller)
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    app.include_router(admin_router(service, guarded))
    app.include_router(key_router(service, guarded))
    app.include_router(mem0_router(service, guarded))  # the Mem0 platform API, for mem0ai clients

    return app
