"""/healthz, cheap enough to leave open: the service's report (store ping, index count, embedder,
the LLM endpoint's `GET /models`) is made at most once per `health_cache_seconds`, however often
it is asked, and a caller without the admin credential learns only whether each part is up
(not the store's URL, the index's size or the LLM's address) once access control is on."""

from __future__ import annotations

import threading
import time
from typing import Callable

from fastapi import Request

from dcpm.errors import TooManyRequests, Unauthorized
from dcpm.server.caller import principal_of

PARTS = ("store", "index", "embedder", "llm")


class HealthReport:
    def __init__(self, probe: Callable[[], dict], max_age_seconds: float):
        self._probe = probe
        self._max_age = max_age_seconds
        self._lock = threading.Lock()  # one probe at a time; the callers meanwhile get its answer
        self._report: dict | None = None
        self._made_at = 0.0

    def current(self) -> dict:
        with self._lock:
            if self._report is None or time.monotonic() - self._made_at >= self._max_age:
                self._report = self._probe()
                self._made_at = time.monotonic()
            return self._report


def public_view(report: dict) -> dict:
    """Whether each part is up, and nothing about where or how large it is."""
    return {"status": report["status"],
            **{part: {"ok": report[part].get("ok")} for part in PARTS if isinstance(report.get(part), dict)}}


def sees_details(request: Request, header: str | None) -> bool:
    """The admin (any caller while access control is off) sees the whole report. A wrong credential
    counts towards its address's lockout like anywhere else, but a locked-out address still gets
    the public view: a health probe is never refused."""
    try:
        return principal_of(request, header).is_admin
    except (Unauthorized, TooManyRequests):
        return False
