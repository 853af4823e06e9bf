"""Expiring named leases in the relational store.

Acquisition is one conditional UPDATE (or an INSERT guarded by the primary key), which is
atomic on SQLite and PostgreSQL alike. A lease is renewed by a heartbeat while its holder works
(`held`), so it expires only when the holder is gone or stuck. Expiry alone cannot stop a holder
that still believes it holds the lease (a paused process, a store it could not reach for a
while), so a write made under a lease starts its transaction with `fence`: the UPDATE renews the
lease only if this holder still holds it, and holds the lease row locked until the commit, so
no one takes the lease over between the check and the commit.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from contextlib import contextmanager
from datetime import timedelta
from typing import Iterator

from sqlalchemy import delete, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from dcpm.errors import Conflict
from dcpm.store.db import Database
from dcpm.store.models import Lease, utcnow

HOST = socket.gethostname()
HEARTBEATS_PER_TTL = 3  # renewals per lifetime: two may fail before the lease lapses
log = logging.getLogger("dcpm.store.leases")


class LeaseLost(Conflict):
    """This holder no longer holds the lease (it expired and was taken over): its work is
    abandoned, rolled back, and done again by the new holder."""


def new_holder() -> str:
    """Identifies the process (host and pid) so leases of a dead process can be reclaimed."""
    return f"{HOST}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def try_acquire(db: Database, name: str, holder: str, ttl_seconds: float) -> bool:
    now = utcnow()
    expires = now + timedelta(seconds=ttl_seconds)
    with db.session() as session:
        taken = session.execute(
            update(Lease).where(Lease.name == name, or_(Lease.holder == holder, Lease.expires_at < now))
            .values(holder=holder, expires_at=expires)
        ).rowcount
    if taken:
        return True
    try:
        with db.session() as session:
            session.add(Lease(name=name, holder=holder, expires_at=expires))
        return True
    except IntegrityError:
        return _take_from_dead(db, name, holder, expires)


def _take_from_dead(db: Database, name: str, holder: str, expires) -> bool:  # type: ignore[no-untyped-def]
    """A lease whose holder was a process of this host that no longer exists (kill -9) is taken
    over at once instead of waiting for it to expire."""
    with db.session() as session:
        current = session.get(Lease, name)
        if current is None or not current.holder.startswith(f"{HOST}:") or _alive(int(current.holder.split(":")[1])):
            return False
        return bool(session.execute(update(Lease).where(Lease.name == name, Lease.holder == current.holder)
                                    .values(holder=holder, expires_at=expires)).rowcount)


def release(db: Database, name: str, holder: str) -> None:
    with db.session() as session:
        session.execute(delete(Lease).where(Lease.name == name, Lease.holder == holder))


def renew(db: Database, name: str, holder: str, ttl_seconds: float) -> bool:
    """Extend the lease by `ttl_seconds` from now if `holder` still holds it."""
    with db.session() as session:
        return _extend(session, name, holder, ttl_seconds)


def fence(session: Session, name: str, holder: str, ttl_seconds: float) -> None:
    """The first statement of a transaction that writes under a lease: renews it if `holder`
    still holds it, else raises LeaseLost (the caller's transaction is rolled back)."""
    if not _extend(session, name, holder, ttl_seconds):
        raise LeaseLost(f"{name} was taken over; the work done under it is abandoned")


def _extend(session: Session, name: str, holder: str, ttl_seconds: float) -> bool:
    expires = utcnow() + timedelta(seconds=ttl_seconds)
    return bool(session.execute(update(Lease).where(Lease.name == name, Lease.holder == holder)
                                .values(expires_at=expires)).rowcount)


class _Heartbeat(threading.Thread):
    """Renews one lease every ttl/3 until stopped or until the lease turns out lost."""

    def __init__(self, db: Database, name: str, holder: str, ttl_seconds: float):
        super().__init__(name=f"lease:{name}", daemon=True)
        self.db, self.lease, self.holder, self.ttl = db, name, holder, ttl_seconds
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.ttl / HEARTBEATS_PER_TTL):
            try:
                if not renew(self.db, self.lease, self.holder, self.ttl):
                    log.warning("lease %s was taken over while held; the holder's next write is refused", self.lease)
                    return
            except Exception:  # the store is unreachable for now: the next beat tries again
                log.warning("could not renew lease %s", self.lease, exc_info=True)

    def stop(self) -> None:
        self.stopped.set()
        self.join()


@contextmanager
def held(db: Database, name: str, ttl_seconds: float, wait_seconds: float) -> Iterator[str]:
    """Hold `name` for the block, renewed while the block runs, waiting up to `wait_seconds`
    for it; raises Conflict if busy. Yields the holder, for `fence`."""
    holder = new_holder()
    deadline = time.monotonic() + wait_seconds
    delay = 0.005
    while not try_acquire(db, name, holder, ttl_seconds):
        if time.monotonic() >= deadline:
            raise Conflict(f"{name} is busy")
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
    heartbeat = _Heartbeat(db, name, holder, ttl_seconds)
    heartbeat.start()
    try:
        yield holder
    finally:
        heartbeat.stop()
        release(db, name, holder)


def reclaim_dead(db: Database) -> int:
    """Drop leases held by processes of this host that no longer exist (after kill -9)."""
    with db.session() as session:
        leases = list(session.scalars(select(Lease).where(Lease.holder.like(f"{HOST}:%"))))
        dead = [lease.name for lease in leases if not _alive(int(lease.holder.split(":")[1]))]
        if dead:
            session.execute(delete(Lease).where(Lease.name.in_(dead)))
    return len(dead)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
