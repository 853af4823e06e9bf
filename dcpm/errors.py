"""One exception hierarchy, mapped once to HTTP status codes and CLI exit codes."""

from __future__ import annotations

import errno


class DcpmError(Exception):
    """Base of every error dcpm raises on purpose; `message` is safe to show a user."""

    http_status = 500
    exit_code = 1
    code = "error"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class Invalid(DcpmError):
    """The caller's input is wrong; nothing was changed."""

    http_status = 422
    exit_code = 2
    code = "invalid"


class Unauthorized(DcpmError):
    """No credential, or one the daemon does not accept (wrong, unknown or revoked)."""

    http_status = 401
    exit_code = 7
    code = "unauthorized"


class Forbidden(DcpmError):
    """A valid credential whose scope does not cover the request (a user key asking for another
    user, or for an admin operation)."""

    http_status = 403
    exit_code = 8
    code = "forbidden"


class TooManyRequests(DcpmError):
    """The caller's address sent too many wrong credentials lately; it may try again after
    `retry_after` seconds (sent as the Retry-After header)."""

    http_status = 429
    exit_code = 9
    code = "too_many_requests"

    def __init__(self, message: str, retry_after: int = 1):
        super().__init__(message)
        self.headers = {"Retry-After": str(retry_after)}


class NotFound(DcpmError):
    http_status = 404
    exit_code = 4
    code = "not_found"


class Conflict(DcpmError):
    """The request clashes with the current state (e.g. a data directory in use)."""

    http_status = 409
    exit_code = 5
    code = "conflict"


class Unavailable(DcpmError):
    """A dependency (store, index, model, LLM) cannot serve right now."""

    http_status = 503
    exit_code = 6
    code = "unavailable"


class StorageFull(Unavailable):
    """The disk under the data directory is full; nothing of the failed write was kept."""

    http_status = 507
    code = "storage_full"


def is_disk_full(exc: BaseException) -> bool:
    text = str(exc).lower()
    return getattr(exc, "errno", None) == 28 or "disk is full" in text or "no space left" in text


def is_read_only(exc: BaseException) -> bool:
    """SQLite's SQLITE_READONLY ("attempt to write a readonly database"), PostgreSQL in recovery or
    read-only transaction, or the file system's EROFS."""
    text = str(exc).lower()
    return (getattr(exc, "errno", None) == errno.EROFS or "readonly database" in text
            or "read-only transaction" in text)


# A path the caller named that is missing, of the wrong kind, or not theirs to use.
CALLERS_PATH = {errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.EACCES, errno.EPERM,
                errno.ENAMETOOLONG, errno.ELOOP, errno.EROFS}


def from_os_error(exc: OSError) -> DcpmError:
    """A refusal of the file system as dcpm's error, worded `PATH: reason`: a path the caller named
    is Invalid, a full disk StorageFull, anything else (an I/O error) Unavailable."""
    where = f"{exc.filename}: " if exc.filename is not None else ""
    message = f"{where}{(exc.strerror or str(exc)).lower()}"
    if is_disk_full(exc):
        return StorageFull(message)
    return (Invalid if exc.errno in CALLERS_PATH else Unavailable)(message)


def invalid_from(errors: list[dict], skip: tuple[str, ...] = ("body",)) -> Invalid:
    """One translation of validation errors (Pydantic's or FastAPI's `errors()`) into Invalid,
    for the HTTP API, the Mem0 routes and the CLI alike: `where: what; where: what`."""
    problems = []
    for error in errors:
        if body_problem := _body_problem(error):
            problems.append(body_problem)
            continue
        where = ".".join(str(part) for part in error.get("loc", ()) if part not in skip)
        what = str(error.get("msg")).removeprefix("Value error, ")  # a validator's own words, as it wrote them
        problems.append(f"{where}: {what}" if where else what)
    return Invalid("; ".join(problems) or "invalid request")


JSON_BODY = "content-type: application/json"


def _body_problem(error: dict) -> str | None:
    """FastAPI's errors about a request body as a whole (unparsable, absent, not read as JSON, not
    an object), worded to say what to send instead; None for an error about one field."""
    loc, kind = tuple(error.get("loc", ())), error.get("type")
    if kind == "json_invalid" and loc[:1] == ("body",):
        at = f" at character {loc[1]}" if len(loc) > 1 else ""
        return f"the body is not valid JSON: {error.get('ctx', {}).get('error', 'unreadable')}{at}"
    if loc != ("body",):
        return None
    if kind == "missing":
        return f"this request needs a JSON object as its body, sent with {JSON_BODY}"
    if isinstance(error.get("input"), (bytes, bytearray)):  # a body of another content-type is kept as bytes
        return f"the body was not read as JSON: send it with {JSON_BODY}"
    if kind in ("model_attributes_type", "dict_type"):
        return "the body must be a JSON object ({...}) of the request's fields"
    return None
