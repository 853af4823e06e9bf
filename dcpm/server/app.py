"""The daemon's FastAPI app: creation, the request guards (dcpm.server.guards), the one mapping of
errors to responses, /healthz, the /admin page and the routers. The routes themselves live in
dcpm.server.routes (one module per resource) and dcpm.server.mem0."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated

from fastapi import Depends, FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware

from dcpm import __version__
from dcpm.errors import DcpmError, Invalid, invalid_from
from dcpm.server.caller import current_principal
from dcpm.server.capacity import WaitingAdds
from dcpm.server.docs_pages import add_docs_pages
from dcpm.server.guards import BodyLimit, BodyTooLarge, SameOrigin, error_body, too_large, trusted_hosts
from dcpm.server.health import HealthReport, public_view, sees_details
from dcpm.server.lockout import CredentialLockout
from dcpm.server.mem0.routes import mem0_router
from dcpm.server.routes.consolidation import consolidation_router
from dcpm.server.routes.edits import edits_router
from dcpm.server.routes.inspection import inspection_router
from dcpm.server.routes.keys import keys_router
from dcpm.server.routes.memories import memories_router
from dcpm.server.routes.operations import operations_router
from dcpm.service import MemoryService

ADMIN_PAGE = Path(__file__).parent / "static" / "admin.html"


def telemetry_off() -> dict:
    """Newer FastAPI releases instrument apps with OpenTelemetry; dcpm sends nothing anywhere."""
    if "telemetry" not in inspect.signature(FastAPI).parameters:
        return {}
    return {"telemetry": {"tracing": False, "metrics": False, "logs": False, "operation_spans": False,
                          "auto_configure": False}}


def create_app(service: MemoryService, bound_host: str | None = None, instance: str | None = None) -> FastAPI:
    """The app over `service`. `bound_host` is the address the daemon listens on (`dcpm serve`
    passes it): then a request must name the daemon in its Host header (a loopback name, that
    address or one of `allowed_hosts`), which defeats DNS rebinding. Without it (tests, an app
    mounted elsewhere) Host is not checked; every other guard always applies. `instance` is the
    token `dcpm serve` wrote to daemon.json (dcpm.store.datadir.write_daemon)."""
    settings = service.settings
    app = FastAPI(title="dcpm", version=__version__,
                  description="Long-term memory for LLM assistants: raw turns, facts with supersedes chains, "
                              "LLM-free hybrid search.", docs_url=None, redoc_url=None, **telemetry_off())
    add_docs_pages(app)
    # The last added runs first: Host, then Origin, then the body's size.
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(SameOrigin)
    if bound_host is not None:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=trusted_hosts(bound_host, settings.allowed_hosts),
                           www_redirect=False)
    app.state.service = service  # read by dcpm.server.caller to authenticate each request
    app.state.lockout = CredentialLockout(settings.auth_max_failures, settings.auth_failure_window_seconds)

    @app.exception_handler(DcpmError)
    async def _dcpm_error(_: Request, exc: DcpmError) -> JSONResponse:
        return JSONResponse(error_body(exc.code, exc.message), status_code=exc.http_status,
                            headers=getattr(exc, "headers", None))  # TooManyRequests: Retry-After

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code, message = "http_error", str(exc.detail)
        # FastAPI answers 400 'There was an error parsing the body' for what json.loads raises besides
        # a JSONDecodeError: bytes that are not UTF-8, an integer past Python's 4300 digits. The
        # status stays; the message says which.
        if isinstance(exc.__cause__, UnicodeDecodeError):
            code, message = "invalid", "the body is not UTF-8 text: send JSON encoded as UTF-8"
        elif isinstance(exc.__cause__, ValueError):
            reason = str(exc.__cause__).split(":")[0]  # not Python's advice on raising its limit
            code, message = "invalid", f"the body could not be read as JSON: {reason}"
        return JSONResponse(error_body(code, message), status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(BodyTooLarge)
    async def _too_large(_: Request, exc: BodyTooLarge) -> JSONResponse:
        return too_large(exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return await _dcpm_error(request, invalid_from(list(exc.errors())))

    @app.exception_handler(UnicodeEncodeError)
    async def _not_unicode(request: Request, _: UnicodeEncodeError) -> JSONResponse:
        """A JSON escape of a lone surrogate (\\ud800) parses into text that no store or tokenizer
        can encode: the caller's input, not a fault of the daemon."""
        return await _dcpm_error(request, Invalid("the request holds text that is not valid Unicode "
                                                  "(a lone surrogate such as \\ud800)"))

    # Every route but /healthz, the /admin page shell and the OpenAPI pages needs a credential once
    # access control is on (dcpm.auth); each route then checks the caller's scope in one line.
    guarded = [Depends(current_principal)]

    health = HealthReport(service.health, settings.health_cache_seconds)

    @app.get("/healthz", tags=["operations"])
    def healthz(request: Request, authorization: Annotated[str | None, Header()] = None) -> dict:
        """Store, index, embedder and LLM reachability, probed at most every `health_cache_seconds`.
        Once access control is on, only the admin sees more than whether each part is up."""
        report = health.current()
        return report if sees_details(request, authorization) else public_view(report)

    @app.get("/healthz/instance", tags=["operations"])
    def healthz_instance() -> dict:
        """The token this daemon wrote to its data directory's daemon.json: a CLI command checks it
        before it sends anything, so it never acts on another data directory's daemon."""
        return {"instance": instance}

    @app.get("/admin", response_class=HTMLResponse, include_in_schema=False)
    def admin_page() -> HTMLResponse:
        """Read-only inspection page; it fetches everything through this API with the admin token."""
        return HTMLResponse(ADMIN_PAGE.read_text(encoding="utf-8"),
                            headers={"Content-Security-Policy": "default-src 'self'; script-src 'unsafe-inline'; "
                                                                "style-src 'unsafe-inline'; connect-src 'self'"})

    waiting = WaitingAdds(settings.max_waiting_adds, settings.waiting_adds_per_user)  # dcpm's and Mem0's add
    app.include_router(memories_router(service, guarded, waiting))
    for router in (inspection_router, edits_router, consolidation_router, operations_router, keys_router):
        app.include_router(router(service, guarded))
    app.include_router(mem0_router(service, guarded, waiting))  # the Mem0 platform API, for mem0ai clients
    app.openapi = lambda: described_errors(app)
    return app


def described_errors(app: FastAPI) -> dict:
    """The OpenAPI document with FastAPI's 422 body (a list under `detail`) replaced by the body
    every error really has (`error_body`), so generated clients and schema checks agree with it."""
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        text = {"type": "string"}
        schema.get("components", {}).get("schemas", {})["HTTPValidationError"] = {
            "title": "Error", "type": "object", "required": ["error", "message", "detail"],
            "properties": {"error": text, "message": text, "detail": text}}
        app.openapi_schema = schema
    return app.openapi_schema
