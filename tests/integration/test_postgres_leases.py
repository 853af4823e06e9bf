"""Store leases when many daemons on several hosts share one database: a holder's liveness is its
lease's expiry, by the database's clock; a pid is checked only for a holder of this very host."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from datetime import timedelta

import pytest

from dcpm.store import leases
from dcpm.store.db import Database

pytestmark = pytest.mark.storage


def dead_pid() -> int:
    """The pid of a process of this host that has exited."""
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True)
    return int(finished.stdout)


@pytest.mark.parametrize("host", ["db-worker-2/9f3c01aa", f"{socket.gethostname()}/00000000"],
                         ids=["another-host", "same-name-another-container"])
def test_a_lease_held_on_another_host_is_taken_only_once_it_expires(db, host):
    elsewhere = f"{host}:{dead_pid()}:a1b2c3d4"  # that pid is free here; it says nothing of the other host
    assert leases.try_acquire(db, "write:ana", elsewhere, 1.5)
    here = leases.new_holder()
    assert not leases.try_acquire(db, "write:ana", here, 60)
    assert leases.reclaim_dead(db) == 0  # a daemon starting here leaves it alone
    time.sleep(1.7)
    assert leases.try_acquire(db, "write:ana", here, 60)
    assert not leases.renew(db, "write:ana", elsewhere, 60)  # the old holder, back, finds it gone


def test_a_lease_of_a_process_of_this_host_that_died_is_taken_at_once(db):
    crashed = f"{leases.HOST}:{dead_pid()}:a1b2c3d4"
    assert leases.try_acquire(db, "consolidate:ana", crashed, 600)
    assert leases.try_acquire(db, "consolidate:ana", leases.new_holder(), 60)
    assert leases.try_acquire(db, "write:bob", crashed, 600)
    assert leases.reclaim_dead(db) == 1
    assert leases.try_acquire(db, "write:bob", leases.new_holder(), 60)


def test_a_waiting_writer_gets_the_lease_as_soon_as_its_holder_lets_go(db):
    holder = leases.new_holder()
    assert leases.try_acquire(db, "write:ana", holder, 60)
    started = time.monotonic()
    threading.Timer(0.5, leases.release, args=(db, "write:ana", holder)).start()
    with leases.held(db, "write:ana", 60, wait_seconds=10):
        waited = time.monotonic() - started
    assert 0.4 < waited < 5


def test_a_host_whose_clock_runs_ahead_does_not_take_a_live_lease(postgres_url, monkeypatch):
    """On PostgreSQL expiry is judged by the server's clock: a daemon whose own clock is an hour
    fast (a host without NTP) neither takes a lease that is still held nor grants itself an hour."""
    db = Database(postgres_url)
    try:
        assert leases.try_acquire(db, "write:ana", "db-worker-2/9f3c01aa:4242:a1b2c3d4", 30)
        fast = leases.utcnow() + timedelta(hours=1)
        monkeypatch.setattr(leases, "utcnow", lambda: fast)
        assert not leases.try_acquire(db, "write:ana", leases.new_holder(), 30)
        assert leases.try_acquire(db, "write:bob", leases.new_holder(), 1)
        monkeypatch.undo()
        time.sleep(1.2)  # the fast host's lease of one second is over for a host with the right time
        assert leases.try_acquire(db, "write:bob", "db-worker-2/9f3c01aa:4242:a1b2c3d4", 30)
    finally:
        db.close()
