"""The relational store behaves the same on SQLite and on PostgreSQL: the migrations build the
schema the models describe, JSON compares by value, and times come back as the same instants."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import select, text

from dcpm.store import leases
from dcpm.store.db import Database
from dcpm.store.models import Base, Event, RawInput, User

pytestmark = pytest.mark.storage


def test_the_migrations_build_the_schema_the_models_describe(db):
    with db.engine.connect() as connection:
        assert compare_metadata(MigrationContext.configure(connection), Base.metadata) == []


def test_json_is_compared_by_value_and_keeps_what_it_holds(db):
    detail = {"deleted": True}
    meta = {"mood": "très bien", "tags": ["tea", "bees"], "nested": {"n": 3, "x": 0.5, "none": None}}
    with db.session() as session:
        session.add(User(id="ana"))
        session.flush()  # the user's row first: no ORM relationship orders the inserts
        session.add(Event(user_id="ana", action="deleted", subject_kind="item", subject_id="x", detail=detail))
        session.add(Event(user_id="ana", action="created", subject_kind="item", subject_id="y", detail={"n": 1}))
        session.add(RawInput(id="r1", user_id="ana", request_id="q1", text="hi", timestamp=datetime.now(timezone.utc),
                             meta=meta))
    with db.session() as session:
        assert list(session.scalars(select(Event.subject_id).where(Event.detail == detail))) == ["x"]
        assert list(session.scalars(select(Event.subject_id).where(Event.detail != detail))) == ["y"]
        assert session.get(RawInput, "r1").meta == meta


def test_a_time_with_an_offset_is_read_back_as_the_same_instant_in_utc(db):
    lisbon_summer = datetime(2025, 6, 1, 23, 30, tzinfo=timezone(timedelta(hours=1)))
    with db.session() as session:
        session.add(User(id="ana"))
        session.flush()  # the user's row first: no ORM relationship orders the inserts
        session.add(RawInput(id="r1", user_id="ana", request_id="q1", text="hi", timestamp=lisbon_summer))
    with db.session() as session:
        stored = session.get(RawInput, "r1").timestamp
    assert stored == lisbon_summer and stored.tzinfo == timezone.utc and stored.hour == 22


def test_leases_keep_time_when_the_database_speaks_another_time_zone(postgres_url):
    """Expiry is computed and compared in UTC whatever the server's or session's time zone is."""
    admin = Database(postgres_url, migrate=False)
    name = admin.engine.url.database
    with admin.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text(f"ALTER DATABASE {name} SET timezone TO 'Asia/Tokyo'"))
    admin.close()
    db = Database(postgres_url)
    try:
        with db.engine.connect() as connection:
            assert connection.execute(text("SHOW timezone")).scalar() == "Asia/Tokyo"
        assert leases.try_acquire(db, "write:ana", "db-worker-2/9f3c01aa:4242:a1b2c3d4", 30)
        assert not leases.try_acquire(db, "write:ana", leases.new_holder(), 30)
        with db.session() as session:
            now = leases.now(session)
        assert abs((now - datetime.now(timezone.utc)).total_seconds()) < 60
    finally:
        db.close()
