"""Expiring named leases in the relational store.

Acquisition is one conditional UPDATE (or an INSERT guarded by the primary key), which is
atomic on SQLite and PostgreSQL alike. A lease is renewed by a heartbeat while its holder works
(`held`), so it expires only when the holder is gone or stuck. Expiry alone cannot stop a holder
that still believes it holds the lease (a paused process, a store it could not reach for a
while), so a write made under a lease starts its transaction with `fence`: the UPDATE renews the
lease only if this holder still holds it, and holds the lease row locked until the commit, so
no one takes the lease over between the check and the commit.

Many daemons and workers on several hosts share one PostgreSQL: expiry, by the database's clock
(hosts' clocks may disagree), is the truth about a holder's liveness. A holder names its host
and pid so that a lease of a process known dead can be taken at once, but only a process of the
same host (and pid namespace) is ever checked that way: a pid means nothing elsewhere.
Leases rather than row locks because a claim outlives a transaction: a writer or a consolidation
run spans many transactions and LLM calls, and must not pin a connection meanwhile.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import DateTime, delete, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from dcpm.domain import as_utc
from dcpm.errors import Conflict
from dcpm.store.db import Database
from dcpm.store.models import Lease, utcnow


def _host() -> str:
    """This host, told apart from a namesake: containers often share a hostname, and two pid
    namespaces on one machine share pid numbers, so the boot and the pid namespace are part of it."""
    marks = []
    for path in ("/proc/sys/kernel/random/boot_id", "/proc/self/ns/pid"):
        try:
            marks.append(os.readlink(path) if path.endswith("/pid") else Path(path).read_text().strip())
        except OSError:
            marks.append("")
    return f"{socket.gethostname().replace(':', '-')}/{hashlib.sha256('|'.join(marks).encode()).hexdigest()[:8]}"


HOST = _host()
HEARTBEATS_PER_TTL = 3  # renewals per lifetime: two may fail before the lease lapses
log = logging.getLogger("dcpm.store.leases")


class LeaseLost(Conflict):
    """This holder no longer holds the lease (it expired and was taken over): its work is
    abandoned, rolled back, and done again by the new holder."""


def new_holder() -> str:
    """Identifies the process (host and pid) so leases of a dead process can be reclaimed."""
    return f"{HOST}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def local_pid(holder: str) -> int | None:
    """The pid of a holder that runs on this host; None for a holder elsewhere (or unparsable)."""
    host, _, rest = holder.partition(":")
    pid = rest.partition(":")[0]
    return int(pid) if host == HOST and pid.isdigit() else None


def clock(session: Session) -> datetime | ColumnElement[datetime]:
    """Now, for lease expiry: the database server's clock where many hosts share the database
    (PostgreSQL: the statement's time, as naive UTC like every stored time), this process's on
    SQLite, which only processes of one host can share."""
    if session.get_bind().dialect.name == "postgresql":
        return func.timezone("UTC", func.statement_timestamp(), type_=DateTime())
    return utcnow()


def now(session: Session) -> datetime:
    """The time by `clock`, read as a value (aware UTC): for records other workers compare
    against their own, such as when a consolidation run ended."""
    value = clock(session)
    if isinstance(value, datetime):
        return value
    return session.scalar(select(value)).replace(tzinfo=timezone.utc)


def try_acquire(db: Database, name: str, holder: str, ttl_seconds: float) -> bool:
    with db.session() as session:
        now = clock(session)
        expires = now + timedelta(seconds=ttl_seconds)
        taken = session.execute(
            update(Lease).where(Lease.name == name, or_(Lease.holder == holder, Lease.expires_at < now))
            .values(holder=holder, expires_at=expires)
        ).rowcount
    if taken:
        return True
    try:
        with db.session() as session:
            if _insert_new(session, name, holder, clock(session) + timedelta(seconds=ttl_seconds)):
                return True
    except IntegrityError:
        pass
    return _take_from_dead(db, name, holder, ttl_seconds)


def _insert_new(session: Session, name: str, holder: str, expires: Any) -> bool:
    """Insert the lease unless it exists. ON CONFLICT DO NOTHING where the dialect has it: a
    waiting writer retries many times a second, and PostgreSQL would log each unique violation."""
    dialect = session.get_bind().dialect.name
    values = {"name": name, "holder": holder, "expires_at": expires}
    if dialect in ("postgresql", "sqlite"):
        from sqlalchemy.dialects import postgresql, sqlite  # the one in use is loaded already

        upsert = postgresql.insert if dialect == "postgresql" else sqlite.insert
        inserted = upsert(Lease).values(**values).on_conflict_do_nothing().returning(Lease.name)
        return session.connection().execute(inserted).first() is not None
    session.execute(insert(Lease).values(**values))
    return True


def _take_from_dead(db: Database, name: str, holder: str, ttl_seconds: float) -> bool:
    """A lease whose holder was a process of this host that no longer exists (kill -9) is taken
    over at once instead of waiting for it to expire."""
    with db.session() as session:
        current = session.get(Lease, name)
        pid = local_pid(current.holder) if current is not None else None
        if current is None or pid is None or _alive(pid):
            return False
        expires = clock(session) + timedelta(seconds=ttl_seconds)
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
    expires = clock(session) + timedelta(seconds=ttl_seconds)
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


def consolidation_lease(user_id: str) -> str:
    """The lease a consolidation run of the user holds while it runs."""
    return f"consolidate:{user_id}"


def still_held(session: Session, name: str, holder: str | None) -> bool:
    """Whether `holder` holds the lease `name` now: it is there, unexpired, and its process, when
    of this host, is alive (a kill -9 leaves the row until it expires or is reclaimed)."""
    lease = session.get(Lease, name)
    if lease is None or lease.holder != holder:
        return False
    pid = local_pid(holder)
    return as_utc(lease.expires_at) >= now(session) and (pid is None or _alive(pid))


def reclaim_dead(db: Database) -> int:
    """Drop leases held by processes of this host that no longer exist (after kill -9); those of
    other hosts are left to expire."""
    with db.session() as session:
        leases = list(session.scalars(select(Lease).where(Lease.holder.startswith(f"{HOST}:", autoescape=True))))
        dead = [(lease.name, lease.holder) for lease in leases
                if (pid := local_pid(lease.holder)) is not None and not _alive(pid)]
        for name, holder in dead:  # only if the same holder still has it
            session.execute(delete(Lease).where(Lease.name == name, Lease.holder == holder))
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
