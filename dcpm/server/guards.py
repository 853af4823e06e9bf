"""What every request passes before a route sees it: the Host it names (DNS rebinding), the
Origin a browser sends (cross-site requests), and the size of its body, counted as it streams.
All three answer before anything is parsed or authenticated."""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dcpm.server.exposure import LOOPBACK_NAMES, WILDCARDS

DEFAULT_PORTS = {"http": "80", "https": "443"}


def error_body(code: str, message: str) -> dict:
    """Every error body: dcpm's `error` code and `message`, and the same message as `detail`, where
    FastAPI and Mem0 clients read it."""
    return {"error": code, "message": message, "detail": message}


def trusted_hosts(bound_host: str, allowed: list[str]) -> list[str]:
    """The Host names a daemon bound to `bound_host` answers: the loopback names, the bound address
    and the operator's `allowed_hosts`; ["*"] (no check) when it listens on every address and no
    name was configured, since network clients may use any of the machine's names there."""
    if bound_host in WILDCARDS and not allowed:
        return ["*"]
    names = [*LOOPBACK_NAMES, *allowed] + ([] if bound_host in WILDCARDS else [bound_host])
    return [f"[{name}]" if ":" in name else name for name in names]  # IPv6 literals as the Host header writes them


class BodyTooLarge(HTTPException):
    """Raised from the counted `receive`; FastAPI re-raises an HTTPException met while reading a
    body, so the app's handler answers it (with `too_large`, as the middleware does)."""

    def __init__(self, max_bytes: int):
        super().__init__(status_code=413, detail=f"request body over {max_bytes} bytes")


def too_large(exc: BodyTooLarge) -> JSONResponse:
    return JSONResponse(error_body("too_large", str(exc.detail)), status_code=exc.status_code)


class BodyLimit:
    """Refuse bodies over `max_bytes`: at once by their Content-Length, and for chunked bodies
    (no length) by counting the bytes as they arrive, so no body over the limit is ever held.
    (FastAPI's own `max_body_size` came only with releases newer than the ones dcpm supports.)"""

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = Headers(scope=scope).get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            return await self._refuse(scope, receive, send)
        received = 0
        started = False

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_bytes:
                raise BodyTooLarge(self.max_bytes)
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except BodyTooLarge:
            if started:
                raise
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        await too_large(BodyTooLarge(self.max_bytes))(scope, receive, send)


def endpoint(scheme: str, netloc: str) -> tuple[str, str] | None:
    """(host, port) of `netloc` under `scheme`'s default port; None when it is unreadable."""
    try:
        parts = urlsplit(f"{scheme}://{netloc}")
        port = parts.port
    except ValueError:
        return None
    return (parts.hostname, str(port or DEFAULT_PORTS[scheme])) if parts.hostname else None


def same_origin(origin: str, host: str) -> bool:
    """A browser's Origin names the daemon itself: the same host and port as the Host header.
    "null" (sandboxed pages, file://) and anything unreadable are foreign."""
    scheme, _, netloc = origin.partition("://")
    if scheme not in DEFAULT_PORTS:
        return False
    theirs = endpoint(scheme, netloc)
    return theirs is not None and theirs == endpoint(scheme, host)


class SameOrigin:
    """Refuse a request a browser sends from another site's page (its Origin is not this daemon):
    such a page could otherwise POST a text/plain body, or trigger reindex and backfill, without
    a preflight. Clients that are not browsers send no Origin and pass; so do the /admin page's
    own calls, whose Origin is the daemon. dcpm sets no CORS headers, so nothing cross-site is
    meant to work."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = Headers(scope=scope)
            origin = headers.get("origin")
            if origin is not None and not same_origin(origin, headers.get("host", "")):
                response = JSONResponse(error_body("forbidden", f"cross-site request from {origin!r} refused: "
                                                                "the dcpm API serves its own pages and non-browser "
                                                                "clients only"), status_code=403)
                return await response(scope, receive, send)
        await self.app(scope, receive, send)
