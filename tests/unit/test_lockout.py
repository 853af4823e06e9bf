"""The brake on guessing credentials (dcpm.server.lockout), on an injected clock: an address that
sent too many wrong credentials is refused until its window ends; other addresses are not."""

from __future__ import annotations

import pytest

from dcpm.errors import TooManyRequests
from dcpm.server.lockout import CredentialLockout


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def fail(lockout: CredentialLockout, address: str, times: int) -> None:
    for _ in range(times):
        lockout.check(address)
        lockout.failed(address)


def test_an_address_is_locked_after_too_many_failures_until_its_window_ends():
    clock = Clock()
    lockout = CredentialLockout(max_failures=20, window_seconds=60, clock=clock)
    fail(lockout, "10.0.0.1", 19)
    clock.now += 30
    fail(lockout, "10.0.0.1", 1)
    with pytest.raises(TooManyRequests) as refused:
        lockout.check("10.0.0.1")
    assert refused.value.headers == {"Retry-After": "30"} and "20 wrong credentials" in refused.value.message
    lockout.check("10.0.0.2")  # another address is not affected
    clock.now += 29.5
    with pytest.raises(TooManyRequests) as refused:
        lockout.check("10.0.0.1")
    assert refused.value.headers == {"Retry-After": "1"}
    clock.now += 0.5
    lockout.check("10.0.0.1")  # the window has passed
    fail(lockout, "10.0.0.1", 19)  # and a fresh one begins with its next failure
    lockout.check("10.0.0.1")


def test_failures_spread_over_windows_never_lock():
    clock = Clock()
    lockout = CredentialLockout(max_failures=3, window_seconds=10, clock=clock)
    for _ in range(10):
        fail(lockout, "10.0.0.1", 2)
        clock.now += 10
    lockout.check("10.0.0.1")


def test_the_table_of_addresses_stays_bounded():
    clock = Clock()
    lockout = CredentialLockout(max_failures=2, window_seconds=60, clock=clock, max_addresses=100)
    for n in range(1000):
        lockout.failed(f"10.0.{n // 256}.{n % 256}")
    assert len(lockout) == 100
    clock.now += 60
    lockout.failed("10.9.9.9")
    assert len(lockout) == 1  # ended windows are dropped


def test_zero_failures_allowed_means_no_limit():
    lockout = CredentialLockout(max_failures=0, window_seconds=60)
    fail(lockout, "10.0.0.1", 1000)
    assert len(lockout) == 0


def test_a_credential_that_succeeded_before_passes_a_lockout_and_a_new_one_does_not():
    lockout = CredentialLockout(max_failures=3, window_seconds=60, clock=Clock(), max_addresses=2)
    lockout.succeeded("hash-of-bobs-key")
    fail(lockout, "10.0.0.1", 3)
    lockout.check("10.0.0.1", "hash-of-bobs-key")  # a client behind the same address keeps working
    for unproven in (None, "hash-of-a-guess"):
        with pytest.raises(TooManyRequests):
            lockout.check("10.0.0.1", unproven)
    lockout.succeeded("hash-2")
    lockout.succeeded("hash-3")  # the table keeps the newest max_addresses credentials
    with pytest.raises(TooManyRequests):
        lockout.check("10.0.0.1", "hash-of-bobs-key")
    lockout.check("10.0.0.1", "hash-3")
