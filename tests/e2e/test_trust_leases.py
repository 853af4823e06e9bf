"""The trust review's finding 4 with real timing: store leases are renewed while their holder
works and fence its writes, the apply step claims its turns atomically, and a chain's head is
superseded once. A slow scripted LLM stretches the writer's work past a short lease.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import deque
from contextlib import contextmanager
from typing import Iterator

import httpx
from sqlalchemy import delete, event, func, select

from dcpm.domain import EventAction
from dcpm.store import leases
from dcpm.store.db import Database
from dcpm.store.models import Event, Item, Lease, RawInput
from dcpm.testing.scripted_llm import LLMServer, parse_extract_prompt, purpose_of, supersede_first_candidate

from ..integration.test_writer import add, llm, writer_service  # noqa: F401  (fixtures)
from .daemon import Daemon

PEPPER = "Ana has a greyhound called Pepper"
PATCHED = "Ana has a greyhound called Pepper who loves carrots"


def extracts_of(llm: LLMServer, fragment: str) -> int:  # noqa: F811
    return sum(1 for c in llm.script.calls if purpose_of(c["messages"][0]["content"]) == "extract"
               and fragment in "\n".join(parse_extract_prompt(c["messages"][1]["content"])))


def wait_for(condition, seconds: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_slow_extraction_keeps_its_lease_no_second_extract_and_no_lost_edit(tmp_path):
    with LLMServer() as llm:
        env = {"DCPM_LLM_BASE_URL": llm.url, "DCPM_LLM_MODEL": "scripted", "DCPM_WRITER_LEASE_SECONDS": "2",
               "DCPM_RECOVERY_INTERVAL_SECONDS": "0.5"}
        with Daemon(tmp_path / "data", **env) as daemon:
            first = httpx.post(f"{daemon.url}/v1/memories", json={"user_id": "ana", "text": PEPPER}, timeout=60)
            fact = next(o["id"] for o in first.json()["operations"] if o["op"] == "ADD")
            llm.script.slow_seconds = 14  # past the recovery loop's 10 s grace and many lease lifetimes
            llm.script.faults = deque(["ok", "slow"])  # the extraction is quick, the reconciliation slow
            llm.script.reconcile = lambda items: {"decisions": [
                {"item": 1, "op": "UPDATE", "target": items[0][1][0][0],
                 "text": "Ana has a greyhound called Pepper, adopted from a racing rescue"}]}
            added: dict = {}

            def add_rescue() -> None:
                added["response"] = httpx.post(f"{daemon.url}/v1/memories", timeout=120, json={
                    "user_id": "ana", "text": "Pepper came from a racing rescue"})
                added["at"] = time.monotonic()

            writer = threading.Thread(target=add_rescue)
            writer.start()
            wait_for(lambda: "reconcile" in llm.script.purposes())
            time.sleep(3)  # the lease's TTL is long gone, its holder still works
            patch = httpx.patch(f"{daemon.url}/v1/items/{fact}", json={"text": PATCHED}, timeout=60)
            patched_at = time.monotonic()
            writer.join()
            time.sleep(2)  # a few more recovery sweeps
            final = httpx.get(f"{daemon.url}/v1/items/{fact}", timeout=30).json()

    assert added["response"].status_code in (200, 201) and added["response"].json()["status"] == "done"
    assert extracts_of(llm, "racing rescue") == 1  # no second writer on the same request
    assert patch.status_code in (200, 409)
    if patch.status_code == 200:  # it waited for the writer, and the edit is what stays
        assert patched_at >= added["at"] and final["text"] == PATCHED


def test_a_held_lease_outlives_its_ttl_while_the_holder_works(settings):
    db = Database(settings.sqlalchemy_url)
    try:
        with leases.held(db, "write:ana", 0.6, 0):
            time.sleep(2)
            assert not leases.try_acquire(db, "write:ana", leases.new_holder(), 0.6)
        assert leases.try_acquire(db, "write:ana", leases.new_holder(), 0.6)
    finally:
        db.close()


def queue(svc, text: str) -> str:  # type: ignore[no-untyped-def]
    """Store a turn for extraction without extracting it yet; returns its request id."""
    client, svc.writer.llm = svc.writer.llm, None
    try:
        return add(svc, text).request_id
    finally:
        svc.writer.llm = client


@contextmanager
def meeting_before_item_inserts(svc, seconds: float = 2.0) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """Two threads about to insert an item wait for each other (at most `seconds`), so two
    applies overlap exactly where a missing claim would let both write."""
    barrier, met = threading.Barrier(2, timeout=seconds), threading.local()

    def meet(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        if statement.lstrip().upper().startswith("INSERT INTO ITEMS") and not getattr(met, "done", False):
            met.done = True
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                pass

    event.listen(svc.db.engine, "before_cursor_execute", meet)
    try:
        yield
    finally:
        event.remove(svc.db.engine, "before_cursor_execute", meet)


def run_together(*calls) -> None:  # type: ignore[no-untyped-def]
    threads = [threading.Thread(target=call) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_two_applies_of_one_request_write_one_set_of_items(writer_service):
    svc = writer_service
    request_id = queue(svc, "Ana is learning the cello")
    with meeting_before_item_inserts(writer_service):
        run_together(lambda: svc.writer.process(request_id), lambda: svc.writer.process(request_id))
    with svc.db.session() as session:
        assert [i.text for i in session.scalars(select(Item))] == ["Ana is learning the cello"]
        assert session.scalar(select(func.count()).select_from(Event).where(
            Event.action == EventAction.EXTRACTED)) == 1
        assert set(session.scalars(select(RawInput.status))) == {"done"}


def test_two_supersedes_of_one_head_leave_one_successor(writer_service, llm):  # noqa: F811
    svc = writer_service
    llm.script.reconcile = supersede_first_candidate
    add(svc, "Ana lives in Leeds")
    york, hull = queue(svc, "Ana lives in York"), queue(svc, "Ana lives in Hull")
    with meeting_before_item_inserts(writer_service):
        run_together(lambda: svc.writer.process(york), lambda: svc.writer.process(hull))
    svc.backfill()  # whichever lost the race is applied now, on top of the new head
    with svc.db.session() as session:
        items = list(session.scalars(select(Item)))
    heads = [i for i in items if i.superseded_by_id is None]
    assert len(items) == 3 and len({i.chain_id for i in items}) == 1 and len(heads) == 1
    assert len({i.supersedes_id for i in items}) == 3  # no revision is superseded twice
    assert {i.text for i in items} == {"Ana lives in Leeds", "Ana lives in York", "Ana lives in Hull"}


def test_a_writer_that_lost_its_lease_applies_nothing(writer_service, llm):  # noqa: F811
    svc = writer_service
    llm.script.slow_seconds = 3
    llm.script.reconcile = supersede_first_candidate
    add(svc, "Ana works at the museum")
    llm.script.faults = deque(["ok", "slow", "slow"])  # two reconcile attempts time out: the writer is busy
    writer = threading.Thread(target=add, args=(svc, "Ana works at the library now"))
    writer.start()
    wait_for(lambda: "reconcile" in llm.script.purposes())
    with sqlite3.connect(svc.settings.data_dir / "dcpm.db") as conn:  # another host took the lease over
        conn.execute("UPDATE leases SET holder = 'elsewhere:1:taken' WHERE name = 'write:ana'")
    writer.join()
    with svc.db.session() as session:
        assert [i.text for i in session.scalars(select(Item))] == ["Ana works at the museum"]
        pending = list(session.scalars(select(RawInput).where(RawInput.status == "pending")))
        assert len(pending) == 1 and pending[0].attempts == 0  # not the request's fault: no attempt spent
        session.execute(delete(Lease))
    assert svc.backfill() == 1
    assert [i.text for i in svc.list_memories("ana", status="current").items] == ["Ana works at the library now"]
