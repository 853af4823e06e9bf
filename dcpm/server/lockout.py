"""A brake on guessing credentials: the admin token is chosen by a person and may be weak. After
`auth_max_failures` wrong credentials from one client address within `auth_failure_window_seconds`
(counted from its first failure), every request from that address is answered 429 with
Retry-After, its credential not checked, until the window ends. A success never clears the count
(else a key holder could interleave good requests with guesses at the admin token) and is never
slowed. The lockout is the address's: clients behind one address (loopback, a NAT) share it.
In memory, per process; the table holds at most MAX_ADDRESSES, the oldest dropped first."""

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
        self._lock = threading.Lock()

    def _expire(self, now: float) -> None:
        """Drop the windows that have ended; they sit at the front."""
        while self._failures:
            address, failures = next(iter(self._failures.items()))
            if now - failures.since < self.window:
                return
            del self._failures[address]

    def check(self, address: str) -> None:
        """TooManyRequests while `address` is locked out; nothing otherwise."""
        if not self.max_failures:
            return
        with self._lock:
            now = self.clock()
            self._expire(now)
            failures = self._failures.get(address)
            if failures is None or failures.count < self.max_failures:
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
            now = self.clock()
            self._expire(now)
            failures = self._failures.get(address)
            if failures is not None:
                failures.count += 1
                return
            while len(self._failures) >= self.max_addresses:
                del self._failures[next(iter(self._failures))]
            self._failures[address] = Failures(since=now, count=1)

    def __len__(self) -> int:
        return len(self._failures)
