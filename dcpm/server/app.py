"""The daemon's FastAPI app: creation, the body limit, the one mapping of errors to responses,
/healthz, the /admin page and the routers. The routes themselves live in dcpm.server.routes (one
module per resource) and dcpm.server.mem0."""

from __future__ import annotations

import inspect
from pathlib import Path

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.base import BaseHTTPMiddleware

from dcpm import __version__
from dcpm.errors import DcpmError, invalid_from
from dcpm.server.caller import current_principal
from dcpm.server.mem0.routes import mem0_router
from dcpm.server.routes.consolidation import consolidation_router
from dcpm.server.routes.edits import edits_router
from dcpm.server.routes.inspection import inspection_router
from dcpm.server.routes.keys import keys_router
from dcpm.server.routes.memories import memories_router
from dcpm.server.routes.operations import operations_router
from dcpm.service import MemoryService

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
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return await _dcpm_error(request, invalid_from(list(exc.errors())))

    # Every route but /healthz, the /admin page shell and the OpenAPI pages needs a credential once
    # access control is on (dcpm.auth); each route then checks the caller's scope in one line.
    guarded = [Depends(current_principal)]

    @app.get("/healthz", tags=["operations"])
    def healthz() -> dict:
        """Store, index, embedder and LLM reachability."""
        return service.health()

    @app.get("/admin", response_class=HTMLResponse, include_in_schema=False)
    def admin_page() -> HTMLResponse:
        """Read-only inspection page; it fetches everything through this API with the admin token."""
        return HTMLResponse(ADMIN_PAGE.read_text(encoding="utf-8"),
                            headers={"Content-Security-Policy": "default-src 'self'; script-src 'unsafe-inline'; "
                                                                "style-src 'unsafe-inline'; connect-src 'self'"})

    for router in (memories_router, inspection_router, edits_router, consolidation_router, operations_router,
                   keys_router):
        app.include_router(router(service, guarded))
    app.include_router(mem0_router(service, guarded))  # the Mem0 platform API, for mem0ai clients

    return app
