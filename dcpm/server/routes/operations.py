"""Running the daemon: rebuild the index, process pending inputs, export and restore a user, and
the Prometheus metrics. Admin only, except that an API key may export its own user."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.concurrency import run_in_threadpool

from dcpm.auth import require_admin, require_user
from dcpm.errors import Invalid
from dcpm.server.caller import Caller
from dcpm.server.store_metrics import scrape
from dcpm.service import MemoryService

EXPORT_TYPE = "application/x-ndjson"
TRANSFER_PREFIX = ".transfer-"


def transfer_directory(service: MemoryService) -> tempfile.TemporaryDirectory:
    """Where an export or a restore is staged: inside the data directory (0700, the user's own
    disk) rather than the system's temp directory, so a crash mid-transfer leaves no copy of a
    user where nobody looks; the daemon clears leftovers at start (dcpm.server.daemon)."""
    return tempfile.TemporaryDirectory(dir=service.settings.data_dir, prefix=TRANSFER_PREFIX)


def operations_router(service: MemoryService, guarded: list[Any]) -> APIRouter:
    router = APIRouter(dependencies=guarded)

    @router.post("/v1/admin/reindex", tags=["operations"])
    def reindex(caller: Caller) -> dict:
        """Write every vector again from the relational store, in place (searches go on finding
        every memory), and remove points that no memory has."""
        require_admin(caller)
        return {"points": service.reindex()}

    @router.post("/v1/admin/backfill", tags=["operations"])
    def backfill(caller: Caller, retry_failed: bool = False) -> dict:
        """Process every pending input now (after an LLM was configured); `retry_failed` first gives
        inputs marked failed a fresh set of attempts."""
        require_admin(caller)
        return {"processed": service.backfill(retry_failed=retry_failed)}

    @router.get("/v1/admin/users/{user_id}/export", tags=["admin"], response_class=Response,
                responses={200: {"content": {"application/x-ndjson": {}}}})
    def export_user(user_id: str, caller: Caller) -> Response:
        """Everything of a user as JSONL (first line: the manifest), for `dcpm restore` elsewhere.
        An API key may export its own user."""
        require_user(caller, user_id)
        with transfer_directory(service) as tmp:
            path = Path(tmp) / "export.jsonl"
            service.export_user(user_id, path)
            return Response(path.read_bytes(), media_type=EXPORT_TYPE)

    # The body is read raw, so the schema declares none: OpenAPI tools (schemathesis among them)
    # have no serializer for application/x-ndjson and would refuse the whole schema.
    @router.post("/v1/admin/restore", tags=["admin"])
    async def restore(request: Request, caller: Caller) -> dict:
        """Load an export produced by `dcpm export` into this store. Send the export file as the
        body with `content-type: application/x-ndjson`, a type no web page can send to another
        site without a preflight; any other type is refused (422)."""
        require_admin(caller)
        if request.headers.get("content-type", "").split(";")[0].strip().lower() != EXPORT_TYPE:
            raise Invalid(f"send the export with content-type {EXPORT_TYPE}")
        body = await request.body()
        with transfer_directory(service) as tmp:
            path = Path(tmp) / "restore.jsonl"
            path.write_bytes(body)
            try:
                path.read_text(encoding="utf-8")
                return await run_in_threadpool(service.restore, path)
            except UnicodeDecodeError:
                raise Invalid("the export is not UTF-8 text") from None
            except Invalid as exc:  # the file is the daemon's own copy: its path means nothing to the caller
                raise Invalid(exc.message.replace(str(path), "the export")) from None

    @router.get("/metrics", tags=["operations"], include_in_schema=False)
    def metrics(caller: Caller) -> Response:
        """Prometheus metrics; a scraper sends the admin token once access control is on."""
        require_admin(caller)
        return Response(scrape(service.db), media_type=CONTENT_TYPE_LATEST)

    return router
