"""Index upkeep in the daemon: qdrant-edge builds HNSW only when asked, so ask after enough
new points, or once writes have been quiet for a while."""

from __future__ import annotations

import logging
import threading
import time

from dcpm.config import Settings
from dcpm.index import VectorIndex

log = logging.getLogger("dcpm.index.upkeep")


class IndexMaintenance:
    def __init__(self, index: VectorIndex, settings: Settings):
        self.index = index
        self.after_points = settings.optimize_after_points
        self.idle_seconds = settings.optimize_idle_seconds
        self._unoptimized = 0
        self._last_write = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

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
        started = time.perf_counter()
        changed = self.index.optimize()
        if changed:
            log.info("vector index optimized in %.1fs", time.perf_counter() - started)
        return changed

    def start(self, poll_seconds: float = 1.0) -> None:
        def loop() -> None:
            while not self._stop.wait(poll_seconds):
                if self.due():
                    try:
                        self.run_once()
                    except Exception:  # keep serving; the next round tries again
                        log.exception("index optimization failed")

        self._thread = threading.Thread(target=loop, name="dcpm-index-maintenance", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
