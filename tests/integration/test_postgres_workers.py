"""Many daemons and consolidation workers on one store: two services, each with its own engine
and connections as two processes have, sharing one vector index as daemons share a vector engine.
Writes of one user stay in order across them, a dead daemon's pending input is recovered by the
other, and a nightly pass is split between workers with no user consolidated twice."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import func, select

from dcpm.consolidation.runs import run_consolidation
from dcpm.domain import EventAction
from dcpm.service import MemoryService
from dcpm.store import leases
from dcpm.store.models import ConsolidationRun, Event, Item, Node, RawInput
from dcpm.testing.scripted_llm import LLMServer, parse_extract_prompt, purpose_of

from .test_consolidation import RUNNING, habit_agent, remember
from .test_writer import add, supersede_first_candidate

pytestmark = pytest.mark.storage

ELSEWHERE = "worker-3/5e5e5e5e:4242:deadbeef"  # a holder on another host: only its lease's expiry tells it died
USERS = ["ana", "bob", "cai", "dee", "eli", "fay"]


@pytest.fixture
def llm():
    with LLMServer() as server:
        server.script.reconcile = supersede_first_candidate
        server.script.induce = habit_agent
        yield server


@pytest.fixture
def daemons(settings, embedder, llm):
    settings.llm_base_url, settings.llm_model = llm.url, "scripted"
    settings.llm_timeout, settings.llm_max_retries, settings.llm_retry_base_seconds = 10.0, 2, 0.01
    first = MemoryService(settings, embedder=embedder)
    second = MemoryService(settings.model_copy(), embedder=embedder, lazy=True)
    second.__dict__["index"] = first.index  # the shared vector engine
    yield first, second
    second.__dict__.pop("index")  # closed once, by the first
    second.close()
    first.close()


def extracted(llm: LLMServer) -> list[str]:
    """Every turn the LLM was asked to extract from, once per time it was asked."""
    return [turn for call in llm.script.calls if purpose_of(call["messages"][0]["content"]) == "extract"
            for turn in parse_extract_prompt(call["messages"][1]["content"])]


def test_two_daemons_writing_for_one_user_build_one_linear_chain(daemons, llm):
    cities = ["Leeds", "York", "Hull", "Bath", "Derby", "Truro", "Ely", "Wells", "Ripon", "Bangor"]
    threads = [threading.Thread(target=add, args=(daemons[n % 2], f"Ana lives in {city}"))
               for n, city in enumerate(cities)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with daemons[1].db.session() as session:
        items = list(session.scalars(select(Item)))
        assert set(session.scalars(select(RawInput.status))) == {"done"}
        applied = session.scalar(select(func.count()).select_from(Event).where(Event.action == EventAction.EXTRACTED))
    assert applied == len(cities)  # every input applied exactly once, by one daemon or the other
    assert all(sum(f"Ana lives in {city}" in turn for turn in extracted(llm)) == 1 for city in cities)
    assert sorted(i.text for i in items) == sorted(f"Ana lives in {city}" for city in cities)
    heads = [i for i in items if i.superseded_by_id is None]
    assert len({i.chain_id for i in items}) == 1 and len(heads) == 1
    assert len({i.supersedes_id for i in items}) == len(cities)  # no revision superseded twice: one line
    by_id = {i.id: i for i in items}
    assert all(by_id[i.superseded_by_id].supersedes_id == i.id for i in items if i.superseded_by_id)


def test_input_a_dead_daemon_left_is_recovered_by_another_once_its_lease_runs_out(daemons, llm):
    first, second = daemons
    first.writer.llm = None  # the first daemon stores Ana's turn, takes her writer lease, and dies
    stored = add(first, "Ana moved to Lisbon in May")
    assert leases.try_acquire(first.db, "write:ana", ELSEWHERE, 2)
    second.recovery.grace_seconds = 0
    assert second.recovery.run_once() == 0  # the lease may still be held by a live daemon: not yet
    time.sleep(2.2)
    assert second.recovery.run_once() == 1
    assert second.get(stored.raw_ids[0]).status == "done"
    assert [i.text for i in second.list_memories("ana", kind="identity").items] == ["Ana moved to Lisbon in May"]


def test_two_workers_split_a_nightly_pass_and_consolidate_no_user_twice(daemons, llm):
    def slow_agent(prompt: str):  # type: ignore[no-untyped-def]
        time.sleep(0.4)  # long enough for the two workers' passes to overlap
        return habit_agent(prompt)

    llm.script.induce = slow_agent
    for user in USERS:
        remember(daemons[0], RUNNING, "fitness", user=user)
    reports: dict[int, list] = {}

    def worker(n: int) -> None:
        reports[n] = run_consolidation(daemons[n].consolidation.backends, job_id=f"worker-{n}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with daemons[0].db.session() as session:
        runs = list(session.scalars(select(ConsolidationRun)))
        schemas = list(session.scalars(select(Node.user_id)))
    assert sorted(r.user_id for r in runs) == USERS and {r.status for r in runs} == {"done"}
    assert sorted(schemas) == USERS  # one schema each: no cluster induced twice
    assert {r.job_id for r in runs} == {"worker-0", "worker-1"}  # both workers took part
    for n in (0, 1):  # each worker accounts for every user: done here, or skipped as done by the other
        assert sorted(r.user_id for r in reports[n]) == USERS
        assert {r.status for r in reports[n]} <= {"done", "skipped"}


def test_a_dead_workers_user_is_taken_over_once_its_lease_runs_out(daemons, llm):
    first, second = daemons
    for user in ("ana", "bob"):
        remember(first, RUNNING, "fitness", user=user)
    assert leases.try_acquire(first.db, "consolidate:ana", ELSEWHERE, 2)  # a worker began Ana's run, then died
    with first.db.session() as session:
        session.add(ConsolidationRun(user_id="ana", holder=ELSEWHERE, counts={}))
    backends = second.consolidation.backends
    backends.settings.consolidation_lease_seconds = 3  # its pass looks again every second
    started = time.monotonic()
    reports = run_consolidation(backends)
    assert {r.user_id: r.status for r in reports} == {"ana": "done", "bob": "done"}
    assert time.monotonic() - started > 1.5  # Ana waited for the dead worker's lease to run out
    with first.db.session() as session:
        anas = list(session.scalars(select(ConsolidationRun).where(ConsolidationRun.user_id == "ana")
                                    .order_by(ConsolidationRun.started_at)))
        assert [r.status for r in anas] == ["interrupted", "done"]
        assert session.scalar(select(func.count()).select_from(Node).where(Node.user_id == "ana")) == 1


def test_a_worker_starting_minutes_after_another_does_not_redo_its_users(daemons, llm):
    for user in USERS[:3]:
        remember(daemons[0], RUNNING, "fitness", user=user)
    first = run_consolidation(daemons[0].consolidation.backends, job_id="early")
    assert {r.status for r in first} == {"done"}
    time.sleep(1.5)  # cron on another host fires a little later
    later = run_consolidation(daemons[1].consolidation.backends, job_id="late")
    assert {r.user_id: r.status for r in later} == {user: "skipped" for user in USERS[:3]}
    asked_again = run_consolidation(daemons[1].consolidation.backends, ["ana"], job_id="by-hand")
    assert [r.status for r in asked_again] == ["done"]  # naming a user runs it whatever the window
    daemons[1].settings.consolidation_pass_window_seconds = 0
    assert {r.status for r in run_consolidation(daemons[1].consolidation.backends)} == {"done"}
