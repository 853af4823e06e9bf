"""How many adds may wait for their extraction at once. Every route runs in one pool of worker
threads (anyio's, 40 by default), and an add that waits holds its thread through up to two LLM
calls with retries; so a few slow adds could stall search and /healthz for every tenant. Past
`max_waiting_adds`, an add is stored and answered 202 at once, and extracted in the background,
exactly as with `wait: false`. One user holds at most `max_waiting_adds_per_user` of those slots,
so a key that floods the daemon with adds cannot take every slot from the other users."""

from __future__ import annotations

import threading
from collections import Counter
from contextlib import contextmanager
from typing import Iterator

from dcpm.api.models import AddMemoryRequest


class WaitingAdds:
    def __init__(self, size: int, per_user: int):
        self._size, self._per_user = size, per_user  # size 0: every add is extracted in the background
        self._held: Counter[str] = Counter()  # only users holding a slot: at most `size` entries
        self._lock = threading.Lock()

    def _take(self, user_id: str) -> bool:
        with self._lock:
            if sum(self._held.values()) >= self._size or self._held[user_id] >= self._per_user:
                return False
            self._held[user_id] += 1
            return True

    def _give_back(self, user_id: str) -> None:
        with self._lock:
            self._held[user_id] -= 1
            if self._held[user_id] <= 0:
                del self._held[user_id]

    @contextmanager
    def admit(self, request: AddMemoryRequest) -> Iterator[AddMemoryRequest]:
        """The request to run: as sent while a waiting slot is free and its user holds fewer than
        their share (held until the block ends), else the same request with `wait` off."""
        if not (request.infer and request.wait):
            yield request
            return
        if not self._take(request.user_id):
            yield request.model_copy(update={"wait": False})
            return
        try:
            yield request
        finally:
            self._give_back(request.user_id)
