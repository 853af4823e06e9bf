"""Index upkeep in the daemon: qdrant-edge builds HNSW only when asked, so ask after enough
new points, or once writes have been quiet for a while; and it keeps deleted points' bytes
until compacted, so compact once writes have been quiet for `compact_after_delete_seconds`
after a delete, and at the latest `compact_max_delay_seconds` after it (plus the poll interval
and the compaction's own time). `BackgroundLoop` is the daemon's one shape of periodic work,
shared with the writer's recovery loop."""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from dcpm.config import Settings
from dcpm.errors import StorageFull
from dcpm.index import VectorIndex
from dcpm.store.datadir import ensure_free_space

log = logging.getLogger("dcpm.index.upkeep")


class BackgroundLoop:
    """A daemon thread that calls `step` every `interval` seconds (first right away when
    `immediately`, else after one interval) until `stop`. A failing step is logged with `failure`
    and the next round tries again, so the daemon keeps serving."""

    def __init__(self, name: str, step: Callable[[], object], interval: float, *, logger: logging.Logger,
                 failure: str, immediately: bool = False):
        self.name, self.step, self.interval = name, step, interval
        self.logger, self.failure, self.immediately = logger, failure, immediately
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        if not self.immediately and self._stop.wait(self.interval):
            return
        while True:
            try:
                self.step()
            except Exception:  # keep the loop alive; the next round retries
                self.logger.exception(self.failure)
            if self._stop.wait(self.interval):
                return

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)


class IndexMaintenance:
    def __init__(self, index: VectorIndex, settings: Settings):
        self.index = index
        self.after_points = settings.optimize_after_points
        self.idle_seconds = settings.optimize_idle_seconds
        self.compact_quiet_seconds = settings.compact_after_delete_seconds
        self.compact_max_delay_seconds = settings.compact_max_delay_seconds
        self.data_dir, self.min_free_disk_mb = settings.data_dir, settings.min_free_disk_mb
        self._waiting_for_room = False  # said once per wait
        self._unoptimized = 0
        self._last_write = time.monotonic()
        self._lock = threading.Lock()
        self._loop: BackgroundLoop | None = None

    def note_writes(self, points: int) -> None:
        with self._lock:
            self._unoptimized += points
            self._last_write = time.monotonic()

    def due(self) -> bool:
        with self._lock:
            if self._unoptimized == 0:
                return False
            idle = time.monotonic() - self._last_write >= self.idle_seconds
            return self._unoptimized >= self.after_points or idle

    def run_once(self) -> bool:
        with self._lock:
            self._unoptimized = 0
        return _timed(self.index.optimize, "vector index optimized in %.1fs")

    def compaction_due(self) -> bool:
        """Deleted points are pending and writes have been quiet long enough, or they have
        waited as long as they may."""
        pending = self.index.pending_purge()
        if pending is None:
            return False
        now = time.monotonic()
        with self._lock:
            last_change = max(self._last_write, pending.last_change)
        return now - last_change >= self.compact_quiet_seconds or now - pending.since >= self.compact_max_delay_seconds

    def compact(self) -> bool:
        return _timed(self.index.compact, "vector index compacted after deletes in %.1fs")

    def step(self) -> None:
        if not self._room():
            return
        if self.due():
            self.run_once()
        if self.compaction_due():
            self.compact()

    def _room(self) -> bool:
        """Optimizing and compacting write the shard through memory-mapped files, which a full
        disk turns into a killed process: below the reserve both wait (said once) until there is room."""
        try:
            ensure_free_space(self.data_dir, self.min_free_disk_mb)
        except StorageFull as exc:
            if not self._waiting_for_room:
                log.warning("index upkeep waits for disk space: %s", exc.message)
            self._waiting_for_room = True
            return False
        self._waiting_for_room = False
        return True

    def start(self, poll_seconds: float = 1.0) -> None:
        self._loop = BackgroundLoop("dcpm-index-maintenance", self.step, poll_seconds,
                                    logger=log, failure="index optimization or compaction failed")
        self._loop.start()

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.stop()


def _timed(work: Callable[[], bool], done: str) -> bool:
    """Run one piece of upkeep; log how long it took when it did anything."""
    started = time.perf_counter()
    changed = work()
    if changed:
        log.info(done, time.perf_counter() - started)
    return changed
