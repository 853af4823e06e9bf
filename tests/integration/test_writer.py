"""System 1 writer against a scripted OpenAI-compatible server over real HTTP."""

from __future__ import annotations

import threading
from collections import deque

import pytest
from sqlalchemy import func, select

from dcpm.api.models import AddMemoryRequest, SearchRequest
from dcpm.service import MemoryService
from dcpm.store.models import Item, RawInput
from dcpm.testing.scripted_llm import LLMServer

pytestmark = pytest.mark.storage  # these run on SQLite and on PostgreSQL (tests/conftest.py)


def supersede_first_candidate(items):
    return {"decisions": [{"item": n, "op": "SUPERSEDE", "target": shown[0][0]} if shown else {"item": n, "op": "ADD"}
                          for n, (_, shown) in enumerate(items, 1)]}


@pytest.fixture
def llm():
    with LLMServer() as server:
        yield server


@pytest.fixture
def writer_service(settings, embedder, llm):
    settings.llm_base_url, settings.llm_model = llm.url, "scripted"
    settings.llm_timeout, settings.llm_max_retries, settings.llm_retry_base_seconds = 1.0, 2, 0.01
    settings.recovery_interval_seconds = 0.05
    svc = MemoryService(settings, embedder=embedder)
    yield svc
    svc.close()


def add(svc, text: str, user: str = "ana", **extra):
    return svc.add_memory(AddMemoryRequest(user_id=user, messages=[{"content": text, "name": "Ana"}], **extra))


def test_preference_revised_twice_forms_one_chain_of_three(writer_service, llm):
    llm.script.reconcile = supersede_first_candidate
    first = add(writer_service, "Ana drinks two espressos every morning")
    second = add(writer_service, "Ana switched from espresso to black tea")
    third = add(writer_service, "Ana now only drinks green tea")
    assert [o.op for o in (first.operations + second.operations + third.operations) if o.op != "RAW"] == \
           ["ADD", "SUPERSEDE", "SUPERSEDE"]
    assert first.llm_calls == 1 and second.llm_calls == 2 and third.status == "done"

    hits = writer_service.search(SearchRequest(user_id="ana", query="espresso in the morning", kinds=["identity"])).hits
    chain = hits[0].chain
    assert [link.text for link in chain] == ["Ana drinks two espressos every morning",
                                             "Ana switched from espresso to black tea", "Ana now only drinks green tea"]
    assert [link.current for link in chain] == [False, False, True]
    assert hits[0].current.text == "Ana now only drinks green tea"


def test_update_keeps_the_previous_text_in_history(writer_service, llm):
    add(writer_service, "Ana has a greyhound called Pepper")
    llm.script.reconcile = lambda items: {"decisions": [
        {"item": 1, "op": "UPDATE", "target": items[0][1][0][0],
         "text": "Ana has a greyhound called Pepper, adopted from a racing rescue"}]}
    result = add(writer_service, "Pepper came from a racing rescue")
    update = next(o for o in result.operations if o.op == "UPDATE")
    item = writer_service.get(update.id)
    assert item.text.endswith("racing rescue") and item.revisions[0].text == "Ana has a greyhound called Pepper"
    events = writer_service.history(update.id).events
    updated = next(e for e in events if e.action == "updated")
    assert updated.detail["before"] == "Ana has a greyhound called Pepper"
    assert updated.detail["raw_id"] == result.raw_ids[0]


def test_exact_duplicate_adds_nothing_and_skips_reconciliation(writer_service, llm):
    add(writer_service, "Ana is allergic to penicillin")
    calls_before = len(llm.script.calls)
    again = add(writer_service, "Ana is allergic to penicillin!")
    assert [o.op for o in again.operations if o.op != "RAW"] == ["NONE"]
    assert llm.script.purposes()[calls_before:] == ["extract"]
    with writer_service.db.session() as session:
        assert session.scalar(select(func.count()).select_from(Item)) == 1


def test_supersede_pointing_outside_the_candidates_is_refused(writer_service, llm):
    add(writer_service, "Ana lives in Leeds")
    llm.script.reconcile = lambda items: {"decisions": [{"item": 1, "op": "SUPERSEDE", "target": "7.3"}]}
    result = add(writer_service, "Ana's sister lives in Porto")
    assert [o.op for o in result.operations if o.op != "RAW"] == ["ADD"]
    leeds = writer_service.list_memories("ana", kind="identity").items[0]
    assert leeds.text == "Ana lives in Leeds" and leeds.current


@pytest.mark.parametrize("fault", ["500", "slow", "trickle", "garbage"])
def test_llm_failure_loses_nothing_and_recovers(writer_service, llm, fault):
    llm.script.faults = deque([fault] * 3)  # more than the client's retries
    result = add(writer_service, "Ana starts a new job at the museum on Monday")
    assert result.status == "pending" and result.error
    raw = writer_service.get(result.raw_ids[0])
    assert raw.status == "pending" and raw.error
    assert writer_service.search(SearchRequest(user_id="ana", query="new job", threshold=0)).hits[0].id == raw.id

    writer_service.backfill()  # the server answers again
    assert writer_service.get(raw.id).status == "done"
    assert [i.text for i in writer_service.list_memories("ana").items] == [
        "Ana starts a new job at the museum on Monday"]


def test_a_server_refusing_json_schema_is_answered_in_json_object_mode(writer_service, llm):
    llm.script.refuse_json_schema = True
    result = add(writer_service, "Ana keeps bees")
    assert result.status == "done"
    assert writer_service.llm.mode == "json_object"
    assert llm.script.calls[-1]["response_format"]["type"] == "json_object"


def test_pending_input_without_llm_is_processed_by_backfill(settings, embedder, llm):
    offline = MemoryService(settings, embedder=embedder)
    add(offline, "Ana is vegetarian")
    offline.close()
    settings.llm_base_url, settings.llm_model = llm.url, "scripted"
    online = MemoryService(settings, embedder=embedder)
    try:
        assert online.backfill() == 1
        assert online.list_memories("ana").items[0].text == "Ana is vegetarian"
    finally:
        online.close()


def test_eight_concurrent_writers_on_one_user_build_one_consistent_chain(writer_service, llm):
    llm.script.reconcile = supersede_first_candidate
    cities = ["Leeds", "York", "Hull", "Bath", "Derby", "Truro", "Ely", "Wells"]
    threads = [threading.Thread(target=add, args=(writer_service, f"Ana lives in {city}")) for city in cities]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with writer_service.db.session() as session:
        items = list(session.scalars(select(Item)))
        assert session.scalar(select(func.count()).select_from(RawInput).where(RawInput.status != "done")) == 0
    assert len(items) == 8 and len({i.chain_id for i in items}) == 1
    by_id = {i.id: i for i in items}
    heads = [i for i in items if i.superseded_by_id is None]
    assert len(heads) == 1
    for item in items:
        if item.superseded_by_id:
            assert by_id[item.superseded_by_id].supersedes_id == item.id
    assert len({i.supersedes_id for i in items}) == 8  # no item is superseded twice


def test_a_metadata_key_named_session_id_is_not_the_session_of_what_is_extracted(writer_service):
    add(writer_service, "Ana keeps bees on her allotment", metadata={"session_id": "made-up"})
    [fact] = writer_service.search(SearchRequest(user_id="ana", query="bees", kinds=["identity"])).hits
    assert fact.session_id is None
    assert writer_service.search(SearchRequest(user_id="ana", query="bees", kinds=["identity"],
                                               session_id="made-up")).hits == []
