"""The daemon's recovery loop: pending raw inputs are retried with backoff until processed,
including those left by a crash or a `kill -9` (DCPM 2.2 i: nothing given is ever lost)."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

from dcpm.domain import RawStatus
from dcpm.index.upkeep import BackgroundLoop
from dcpm.store import leases
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
        users = self.writer.users_with_pending(older_than_seconds=self.grace_seconds)
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
