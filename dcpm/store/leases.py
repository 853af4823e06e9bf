"""Expiring named leases in the relational store.

Acquisition is one conditional UPDATE (or an INSERT guarded by the primary key), which is
atomic on SQLite and PostgreSQL alike, so two holders can never both believe they hold a lease.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from contextlib import contextmanager
from datetime import timedelta
from typing import Iterator

from sqlalchemy import delete, or_, select, update
from sqlalchemy.exc import IntegrityError

from dcpm.errors import Conflict
from dcpm.store.db import Database
from dcpm.store.models import Lease, utcnow

HOST = socket.gethostname()


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


@contextmanager
def held(db: Database, name: str, ttl_seconds: float, wait_seconds: float) -> Iterator[str]:
    """Hold `name` for the block, waiting up to `wait_seconds` for it; raises Conflict if busy."""
    holder = new_holder()
    deadline = time.monotonic() + wait_seconds
    delay = 0.005
    while not try_acquire(db, name, holder, ttl_seconds):
        if time.monotonic() >= deadline:
            raise Conflict(f"{name} is busy")
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
    try:
        yield holder
    finally:
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
