"""The daemon's recovery loop: pending raw inputs are retried with backoff until processed,
including those left by a crash or a `kill -9` (DCPM 2.2 i: nothing given is ever lost).

A request that keeps failing is given up after `writer_max_attempts`: its turns become `failed`
(still stored and searchable, the reason in `error`; `dcpm backfill --retry-failed` tries them
again) so that the user's later inputs are not held behind it forever. Failures that are no
request's fault (the LLM endpoint cannot be reached at all or rate-limits every call, the disk is
full) back off the same way but spend no attempt: an outage must not fail every pending input.

Several daemons on one store all sweep: the user's writer lease decides which of them processes
a user's input, so input a daemon left when it died (pending, its lease still held) is taken up
by another once that lease runs out, or at once when the dead process was on this host.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import TYPE_CHECKING, Callable

from sqlalchemy import select
from sqlalchemy.orm import Session

from dcpm.config import Settings
from dcpm.domain import EventAction, ItemKind, RawStatus
from dcpm.errors import DcpmError, StorageFull
from dcpm.index.upkeep import BackgroundLoop
from dcpm.llm import LLMRateLimited, LLMUnreachable
from dcpm.store import events, leases
from dcpm.store.db import Database
from dcpm.store.models import RawInput, utcnow

if TYPE_CHECKING:
    from dcpm.write.writer import Writer

log = logging.getLogger("dcpm.write.recovery")


class RecoveryLoop:
    def __init__(self, writer: Writer, interval_seconds: float, workers: int = 4):
        self.writer = writer
        # Input younger than this belongs to the add_memory call that is processing it right now.
        self.grace_seconds = max(2 * interval_seconds, 10.0)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dcpm-writer")
        self._loop = BackgroundLoop("dcpm-recovery", self.run_once, interval_seconds, logger=log,
                                    failure="recovery sweep failed", immediately=True)

    def run_once(self) -> int:
        """One sweep: drain every user with pending input, users in parallel."""
        users = users_with_pending(self.writer.db, older_than_seconds=self.grace_seconds)
        futures = [self._pool.submit(self.writer.drain, user, None, False, 0.0) for user in users]
        done = sum(sum(1 for r in f.result().values() if r.status == RawStatus.DONE) for f in futures)
        if done:
            log.info("recovery processed %d pending request(s)", done)
        return done

    def submit(self, user_id: str) -> None:
        """Process a user's pending input in the background (add_memory with wait=false)."""
        self._pool.submit(self.writer.drain, user_id)

    def start(self) -> None:
        reclaimed = leases.reclaim_dead(self.writer.db)
        if reclaimed:
            log.warning("reclaimed %d lease(s) of processes that died", reclaimed)
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop()
        self._pool.shutdown(wait=True, cancel_futures=True)


def users_with_pending(db: Database, older_than_seconds: float = 0.0) -> list[str]:
    """Users with pending input; the recovery loop leaves fresh input to its own caller."""
    cutoff = utcnow() - timedelta(seconds=older_than_seconds)
    with db.session() as session:
        return list(session.scalars(select(RawInput.user_id).where(
            RawInput.status == RawStatus.PENDING, RawInput.created_at <= cutoff).distinct()))


def failure_reason(exc: Exception) -> str:
    """Why a request failed, in words that hold no memory text: dcpm's own errors carry messages
    written for that; any other exception is named by its type only (a database error, for one,
    quotes its SQL parameters, that is the user's text)."""
    if isinstance(exc, DcpmError):
        return exc.message
    return f"{type(exc).__module__}.{type(exc).__name__} while processing the request"


def record_failure(db: Database, settings: Settings, request_id: str, exc: Exception,
                   fence: Callable[[Session], None]) -> RawStatus:
    """Back off the request's pending turns (and count the attempt unless the failure was no
    request's fault); give them up as `failed` once `writer_max_attempts` are spent. Returns the
    turns' status. `fence` checks the caller still holds the writer lease."""
    error = failure_reason(exc)
    counted = not isinstance(exc, (LLMUnreachable, LLMRateLimited, StorageFull))
    with db.session() as session:
        fence(session)
        rows = list(session.scalars(select(RawInput).where(RawInput.request_id == request_id,
                                                           RawInput.status == RawStatus.PENDING)))
        if not rows:
            return RawStatus.PENDING
        attempts = rows[0].attempts + counted
        given_up = attempts >= settings.writer_max_attempts and counted
        delay = min(settings.recovery_interval_seconds * 2 ** max(attempts - 1, 0), settings.recovery_max_backoff_seconds)
        for raw in rows:
            raw.attempts, raw.error = attempts, error[:2000]
            raw.status = RawStatus.FAILED if given_up else RawStatus.PENDING
            raw.next_attempt_at = None if given_up else utcnow() + timedelta(seconds=delay)
        events.record(session, EventAction.EXTRACTION_FAILED, user_id=rows[0].user_id, subject_kind=ItemKind.RAW,
                      subject_id=rows[0].id, request_id=request_id, error=error[:500], attempt=attempts)
    if given_up:
        log.warning("request %s failed %d times and is given up (dcpm backfill --retry-failed): %s",
                    request_id, attempts, error)
    else:
        log.warning("request %s stays pending (attempt %d): %s", request_id, attempts, error)
    return RawStatus.FAILED if given_up else RawStatus.PENDING
