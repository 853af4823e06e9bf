"""A brake on guessing credentials: the admin token is chosen by a person and may be weak. After
`auth_max_failures` wrong credentials from one client address within `auth_failure_window_seconds`
(counted from its first failure), a request from that address is answered 429 with Retry-After,
its credential not checked, until the window ends; unless its credential already succeeded in
this process. So a guesser gets no answer about a new guess (a right one included, else guessing
would go on, told apart by the answer), while the clients that share its address (every local
client on loopback, a NAT) go on working with the keys they were using. A success never clears
the count (else a key holder could interleave good requests with guesses at the admin token) and
is never slowed. In memory, per process; each table holds at most MAX_ADDRESSES entries, the
oldest dropped first."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Callable

from dcpm.errors import TooManyRequests

MAX_ADDRESSES = 10_000


@dataclass
class Failures:
    since: float  # the window's start: this address's first failure in it
    count: int


class CredentialLockout:
    def __init__(self, max_failures: int, window_seconds: float, clock: Callable[[], float] = time.monotonic,
                 max_addresses: int = MAX_ADDRESSES):
        self.max_failures, self.window, self.clock = max_failures, window_seconds, clock
        self.max_addresses = max_addresses
        self._failures: dict[str, Failures] = {}  # oldest window first: insertion order is `since` order
        self._proven: dict[str, None] = {}  # hashes of credentials that succeeded, oldest first
        self._lock = threading.Lock()

    def _expire(self, now: float) -> None:
        """Drop the windows that have ended; they sit at the front."""
        while self._failures:
            address, failures = next(iter(self._failures.items()))
            if now - failures.since < self.window:
                return
            del self._failures[address]

    def _current(self, address: str) -> tuple[float, Failures | None]:
        """Now, and the address's failures in a window not yet ended (under the lock)."""
        now = self.clock()
        self._expire(now)
        return now, self._failures.get(address)

    def check(self, address: str, proof: str | None = None) -> None:
        """TooManyRequests while `address` is locked out and `proof` (the credential's hash) is not
        one that succeeded before; nothing otherwise."""
        if not self.max_failures:
            return
        with self._lock:
            now, failures = self._current(address)
            if failures is None or failures.count < self.max_failures or proof in self._proven:
                return
            wait, count = max(1, math.ceil(failures.since + self.window - now)), failures.count
        raise TooManyRequests(f"{count} wrong credentials from this address within "
                              f"{self.window:g} s: requests from it are refused, unchecked, for {wait} s more",
                              retry_after=wait)

    def failed(self, address: str) -> None:
        """Count one wrong credential from `address`."""
        if not self.max_failures:
            return
        with self._lock:
            now, failures = self._current(address)
            if failures is not None:
                failures.count += 1
                return
            while len(self._failures) >= self.max_addresses:
                del self._failures[next(iter(self._failures))]
            self._failures[address] = Failures(since=now, count=1)

    def succeeded(self, proof: str) -> None:
        """Remember a credential (by its hash) that authenticated: it passes a lockout later."""
        if not self.max_failures:
            return
        with self._lock:
            self._proven.pop(proof, None)
            self._proven[proof] = None
            while len(self._proven) > self.max_addresses:
                del self._proven[next(iter(self._proven))]

    def __len__(self) -> int:
        return len(self._failures)
