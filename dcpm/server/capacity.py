"""How many adds may wait for their extraction at once. Every route runs in one pool of worker
threads (anyio's, 40 by default), and an add that waits holds its thread through up to two LLM
calls with retries; so a few slow adds could stall search and /healthz for every tenant. Past
`max_waiting_adds`, an add is stored and answered 202 at once, and extracted in the background,
exactly as with `wait: false`."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

from dcpm.api.models import AddMemoryRequest


class WaitingAdds:
    def __init__(self, size: int):
        self._free = threading.BoundedSemaphore(size)  # 0: every add is extracted in the background

    @contextmanager
    def admit(self, request: AddMemoryRequest) -> Iterator[AddMemoryRequest]:
        """The request to run: as sent while a waiting slot is free (held until the block ends),
        else the same request with `wait` off."""
        if not (request.infer and request.wait):
            yield request
            return
        if not self._free.acquire(blocking=False):
            yield request.model_copy(update={"wait": False})
            return
        try:
            yield request
        finally:
            self._free.release()
