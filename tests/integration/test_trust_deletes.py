"""Findings 6 and 13: a hard delete leaves nothing behind in the store, the log or the read path,
and deletes exactly what it says, even while System 1 writes."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import func, select

from dcpm.admin import delete as admin_delete
from dcpm.api.models import AddMemoryRequest, Message, SearchRequest
from dcpm.consolidation.graph import add_evidence, create_node
from dcpm.index import projection
from dcpm.store import leases
from dcpm.store.items import NewItem, add_item, supersede
from dcpm.store.models import Event, Item

from .scenarios import ana_drinks_chain, at

pytestmark = pytest.mark.storage  # these run on SQLite and on PostgreSQL (tests/conftest.py)


def test_deleting_a_user_leaves_no_event_row_with_their_id(service):
    ana_drinks_chain(service)
    service.add_memory(AddMemoryRequest(user_id="ana", text="I keep bees on my allotment", infer=False))
    result = service.delete_user("ana")
    with service.db.session() as session:
        assert session.scalar(select(func.count()).select_from(Event).where(Event.user_id == "ana")) == 0
        tombstones = list(session.scalars(select(Event)))
    assert len(tombstones) == result.events_redacted and all(e.detail == {"deleted": True} for e in tombstones)
    assert len({e.user_id for e in tombstones}) == 1  # one pseudonym keeps the deleted user's log together


@pytest.mark.sqlite_only  # the WAL checkpoint after a delete is SQLite's
def test_a_scrub_that_a_reader_blocks_is_reported_not_ignored(service):
    service.add_memory(AddMemoryRequest(user_id="ana", text="I keep bees on my allotment", infer=False))
    reader = service.db.engine.connect()
    try:
        reader.exec_driver_sql("BEGIN")
        reader.exec_driver_sql("SELECT count(*) FROM raw_inputs").all()  # a search holding its snapshot
        service.add_memory(AddMemoryRequest(user_id="ana", text="My locker code is 4711", infer=False))
        assert service.db.scrub(wait_seconds=0.2) is False
    finally:
        reader.rollback()
        reader.close()
    assert service.db.scrub() is True


@pytest.mark.sqlite_only
def test_a_scrub_a_reader_blocked_is_finished_once_the_reader_goes(service, monkeypatch):
    """The deleted text stayed in the write-ahead log until some later delete scrubbed it (maybe
    never); the daemon now retries until the scrub goes through."""
    monkeypatch.setattr("dcpm.parts.SCRUB_RETRY_SECONDS", 0.2)
    marker = "WALRES-5521"
    service.add_memory(AddMemoryRequest(user_id="erin", text=f"My locker code is {marker}", infer=False))
    service.add_memory(AddMemoryRequest(user_id="ana", text="I keep bees on my allotment", infer=False))
    reader = service.db.engine.connect()
    try:
        reader.exec_driver_sql("BEGIN")
        reader.exec_driver_sql("SELECT count(*) FROM raw_inputs").all()  # a backup tool holding its snapshot
        service.delete_user("erin")  # its checkpoint waits for the reader, then gives up
        assert service.db.scrub_pending
    finally:
        reader.rollback()
        reader.close()
    service.start_background()
    deadline = time.monotonic() + 15
    while service.db.scrub_pending and time.monotonic() < deadline:
        time.sleep(0.1)
    store = service.settings.data_dir / "dcpm.db"
    for path in (store, store.with_name("dcpm.db-wal")):
        assert not path.exists() or marker.encode() not in path.read_bytes()


def test_a_chain_delete_also_deletes_a_revision_written_while_it_waited(service):
    coffee, black, green = ana_drinks_chain(service)
    outcome: dict = {}

    def delete_chain() -> None:
        outcome["deletion"] = admin_delete.delete_chain(service.db, service.index, service.settings, coffee.id)

    with leases.held(service.db, "write:ana", 60, 0):  # System 1 is writing for ana
        thread = threading.Thread(target=delete_chain)
        thread.start()
        time.sleep(0.5)  # the delete is waiting for the lease now
        with service.db.session() as session:
            rooibos = supersede(session, session.get(Item, green.id),
                                NewItem("identity", "Ana drinks rooibos now", valid_from=at(2025, 9, 1)))
        service.writer.index_rows(items=[rooibos])
    thread.join(30)
    assert sorted(outcome["deletion"].deleted) == sorted([coffee.id, black.id, green.id, rooibos.id])
    assert service.list_memories("ana").total == 0 and not service.index.existing([rooibos.id])


def test_deleting_a_fact_keeps_the_other_turns_of_its_request(service):
    said = service.add_memory(AddMemoryRequest(user_id="ana", infer=False, messages=[
        Message(content="I keep bees on my allotment"), Message(role="assistant", content="How lovely!"),
        Message(content="Anyway, what's the weather tomorrow?")]))
    with service.db.session() as session:
        bees = add_item(session, "ana", NewItem("fact", "Ana keeps bees", valid_from=at(2025, 3, 1),
                                                source_raw_id=said.raw_ids[0]))
    service.writer.index_rows(items=[bees])
    deletion = service.delete_memory(bees.id)
    assert deletion.raw_deleted == [said.raw_ids[0]]
    kept = [r.id for r in service.list_memories("ana", kind="raw").items]
    assert kept == said.raw_ids[1:]


def test_a_node_that_lost_evidence_is_no_longer_surfaced(service):
    coffee, black, green = ana_drinks_chain(service)
    with service.db.session() as session:
        drinks = create_node(session, "ana", "schema", "Ana keeps changing what she drinks", "food", None)
        add_evidence(session, drinks, [black.id, green.id], None)
    projection.index_rows(service.db, service.index, service.embedder, nodes=[drinks])
    query = SearchRequest(user_id="ana", query="green tea no caffeine", kinds=["identity"])
    assert [n.id for n in service.search(query).nodes] == [drinks.id]
    assert service.delete_memory(black.id).nodes_reinduce == [drinks.id]
    result = service.search(query)
    assert result.nodes == [] and "changing what she drinks" not in result.context
    assert service.graph("ana").nodes == []


def test_a_delete_or_edit_whose_lease_was_taken_over_writes_nothing(service):
    from sqlalchemy import update

    from dcpm.errors import Conflict
    from dcpm.store.models import Lease

    coffee, black, green = ana_drinks_chain(service)
    with admin_delete.writer_lease(service.db, service.settings, "ana") as holder:
        with service.db.session() as session:  # another process decided we were dead and took over
            session.execute(update(Lease).where(Lease.name == "write:ana").values(holder="elsewhere:1:taken"))
        try:
            with admin_delete.fenced(service.db, service.settings, "ana", holder) as session:
                session.delete(session.get(Item, green.id))
        except leases.LeaseLost:
            pass
        else:
            raise AssertionError("a write under a lost lease went through")
        assert issubclass(leases.LeaseLost, Conflict)
    assert service.get(green.id).text == green.text
