"""`add_memory` and bulk import, the entry of System 1 (DCPM 2.2): the turns are committed
verbatim (step i) and indexed, so they are searchable at once; then, with `infer`, the writer
extracts and reconciles them (steps ii-iv), now or in the background."""

from __future__ import annotations

import uuid
from typing import Callable

from sqlalchemy import select, update

from dcpm.api.models import AddMemoryRequest, AddMemoryResponse, Operation
from dcpm.domain import EventAction, ItemKind, Op, RawStatus, Turn
from dcpm.errors import Unavailable
from dcpm.store import events
from dcpm.store.datadir import ensure_free_space
from dcpm.store.db import Database
from dcpm.store.models import Item, RawInput
from dcpm.write.raw import check_turns, persist_turns
from dcpm.write.recovery import RecoveryLoop, users_with_pending
from dcpm.write.writer import Writer, WriteResult


def add_memory(writer: Writer, recovery: RecoveryLoop, request: AddMemoryRequest) -> AddMemoryResponse:
    """Raw persist, then index; extraction follows as the request asks (wait, background, or
    later when no LLM is configured). Nothing is written when the request is refused."""
    turns = [Turn(text=m.content, role=m.role, speaker=m.name, session_id=request.session_id,
                  timestamp=m.timestamp or request.timestamp, metadata=request.metadata,
                  own_metadata=request.own_metadata)
             for m in request.turns()]
    rows = _persist(writer, request.user_id, turns, RawStatus.PENDING if request.infer else RawStatus.RAW)
    response = AddMemoryResponse(
        request_id=rows[0].request_id, user_id=request.user_id, raw_ids=[r.id for r in rows],
        status=RawStatus.PENDING if request.infer else "stored", message="stored verbatim",
        operations=[Operation(op=Op.RAW, id=r.id, text=r.text, kind=ItemKind.RAW) for r in rows],
    )
    if not request.infer:
        return response
    if writer.llm is None:
        response.message = "stored verbatim; extraction waits until an LLM is configured (dcpm backfill)"
    elif not request.wait:
        recovery.submit(request.user_id)
        response.message = "stored verbatim; extraction runs in the background"
    else:
        request_id = response.request_id
        result = writer.drain(request.user_id, until=request_id).get(request_id)
        if result is None:  # processed by another worker meanwhile, or still queued behind an earlier input
            result = outcome(writer.db, request_id)
        _report(response, result)
    return response


def import_turns(writer: Writer, user_id: str, turns: list[Turn]) -> int:
    """Bulk raw ingest of one batch; turns carry deterministic ids, known ones are skipped."""
    return len(_persist(writer, user_id, turns, RawStatus.RAW, skip_existing=True))


def backfill(writer: Writer, progress: Callable[[int, int], None] | None = None, retry_failed: bool = False) -> int:
    """Process everything pending now (e.g. after an LLM was configured), user by user; returns
    the requests done. `retry_failed` first gives inputs marked failed a fresh set of attempts.
    `progress` hears (users done, users)."""
    if writer.llm is None:
        raise Unavailable("no LLM configured: set DCPM_LLM_BASE_URL and DCPM_LLM_MODEL first")
    if retry_failed:
        with writer.db.session() as session:
            session.execute(update(RawInput).where(RawInput.status == RawStatus.FAILED)
                            .values(status=RawStatus.PENDING, attempts=0, next_attempt_at=None))
    users = users_with_pending(writer.db)
    done = 0
    for number, user_id in enumerate(users, 1):
        results = writer.drain(user_id, force=True)
        done += sum(1 for r in results.values() if r.status == RawStatus.DONE)
        if progress:
            progress(number, len(users))
    return done


def _persist(writer: Writer, user_id: str, turns: list[Turn], status: RawStatus, skip_existing: bool = False):  # type: ignore[no-untyped-def]
    """Step (i): checks first, so a refused request writes nothing; then rows, then vectors."""
    check_turns(turns, writer.settings)
    ensure_free_space(writer.settings.data_dir, writer.settings.min_free_disk_mb)
    with writer.db.session() as session:
        rows = persist_turns(session, user_id, turns, request_id=str(uuid.uuid4()), status=status,
                             skip_existing=skip_existing)
    if rows:
        writer.index_rows(raws=rows)
    return rows


def outcome(db: Database, request_id: str) -> WriteResult:
    """What happened to a request another worker processed: its status and operations, read
    back from the rows and the event log."""
    with db.session() as session:
        statuses = set(session.scalars(select(RawInput.status).where(RawInput.request_id == request_id)))
        changes = [events.change_of(e) for e in events.of_request(session, request_id,
                                                                  (EventAction.CREATED, EventAction.UPDATED))]
        items = {i.id: i for i in session.scalars(select(Item).where(Item.id.in_([c.item_id for c in changes])))}
    operations = []
    for change in changes:
        item = items.get(change.item_id)
        if item is not None and change.op is not None:  # a deleted item left only a tombstone
            operations.append(Operation(op=change.op, id=item.id, text=item.text, kind=item.kind,
                                        target=change.supersedes, chain_id=item.chain_id))
    status = next((s for s in (RawStatus.PENDING, RawStatus.FAILED) if s in statuses), RawStatus.DONE)
    return WriteResult(request_id, status, operations)


MESSAGES = {RawStatus.DONE: "extracted",
            RawStatus.PENDING: "stored verbatim; extraction failed and will be retried",
            RawStatus.FAILED: "stored verbatim; extraction failed for good (dcpm backfill --retry-failed tries again)"}


def _report(response: AddMemoryResponse, result: WriteResult) -> None:
    """What the writer did, in the response's words."""
    if result.status == RawStatus.PENDING and not result.error:
        response.message = "stored verbatim; waiting behind an earlier input of this user"
        return
    response.status = result.status
    response.operations += result.operations
    response.llm_calls, response.tokens, response.error = result.usage.calls, result.usage.tokens, result.error
    response.timings_ms = {"total": round(result.seconds * 1000, 2), "llm": round(result.usage.seconds * 1000, 2),
                           "non_llm": round(result.non_llm_seconds * 1000, 2)}
    response.message = MESSAGES[result.status]
