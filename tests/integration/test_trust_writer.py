"""The trust review against the real writer (findings 3, 6 and 11): a scripted OpenAI-compatible
server over HTTP, real SQLite, the real embedded index.

- A request that can never be extracted ends `failed` after `writer_max_attempts`, with backoff
  between attempts and no memory text in its error, and the user's later inputs go on.
- Answers are bounded to the columns they go into; prompts fit the model's context.
- A crash between the commit and the index's payload write is repaired at start-up.
- No index write brings back the vector of a row deleted meanwhile.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import time
from collections import deque
from datetime import datetime, timezone

import pytest
from sqlalchemy import select

from dcpm.domain import EventAction
from dcpm.index import Scope, projection
from dcpm.index.base import DENSE
from dcpm.llm.budget import estimate_tokens
from dcpm.service import MemoryService
from dcpm.store.models import Event, Item, RawInput
from dcpm.testing.scripted_llm import parse_extract_prompt, purpose_of

from .test_writer import add, llm, supersede_first_candidate, writer_service  # noqa: F401  (fixtures)

pytestmark = pytest.mark.storage  # these run on SQLite and on PostgreSQL (tests/conftest.py)

SECRET = "Ana's locker code is kumquat"


def new_turns(body: dict) -> str:
    """The NEW TURNS part of an extraction prompt (the history may quote earlier turns)."""
    return "\n".join(parse_extract_prompt(body["messages"][1]["content"]))


def extracts_of(llm, fragment: str) -> list[dict]:  # noqa: F811
    return [c for c in llm.script.calls if purpose_of(c["messages"][0]["content"]) == "extract"
            and fragment in new_turns(c)]


def answer_without_chat_completion(llm) -> None:  # noqa: F811
    """The endpoint answers 200 with a body that is not a chat completion, for the secret only."""
    normal = llm.script.answer

    def answer(body: dict):  # type: ignore[no-untyped-def]
        if purpose_of(body["messages"][0]["content"]) == "extract" and "kumquat" in new_turns(body):
            with llm.script.lock:
                llm.script.calls.append(body)
            return 200, "the model is sleeping"
        return normal(body)

    llm.script.answer = answer


def store_refuses_the_secret(svc) -> None:
    """A real store error while applying (the kind PostgreSQL raises for an over-long column)."""
    with sqlite3.connect(svc.settings.data_dir / "dcpm.db") as conn:
        conn.execute("CREATE TRIGGER refuse_secret BEFORE INSERT ON items WHEN NEW.text LIKE '%kumquat%' "
                     "BEGIN SELECT RAISE(ABORT, 'refused'); END")


def raw_row(svc, raw_id: str) -> RawInput:
    with svc.db.session() as session:
        return session.get(RawInput, raw_id)


def failures_of(svc, raw_id: str) -> list[Event]:
    with svc.db.session() as session:
        return list(session.scalars(select(Event).where(Event.subject_id == raw_id,
                                                        Event.action == EventAction.EXTRACTION_FAILED)))


@pytest.mark.sqlite_only  # writes to the SQLite file directly
@pytest.mark.parametrize("fault", [answer_without_chat_completion, store_refuses_the_secret])
def test_a_request_that_always_fails_ends_failed_and_the_users_later_input_goes_on(writer_service, llm, fault):
    svc = writer_service
    svc.settings.writer_max_attempts = 3
    fault(llm if fault is answer_without_chat_completion else svc)
    first = add(svc, SECRET)
    assert first.status == "pending" and first.error and "kumquat" not in first.error
    raw = raw_row(svc, first.raw_ids[0])
    assert raw.attempts == 1 and raw.next_attempt_at > datetime.now(timezone.utc)  # backoff, not a hot loop
    calls = len(llm.script.calls)
    svc.writer.drain("ana")  # the recovery sweep respects the backoff: no LLM call
    assert len(llm.script.calls) == calls

    later = add(svc, "Ana adopted a greyhound called Pepper")
    assert later.status == "pending" and "waiting behind an earlier input" in later.message
    for _ in range(2):
        svc.backfill()

    raw = raw_row(svc, first.raw_ids[0])
    assert raw.status == "failed" and raw.attempts == 3 and raw.next_attempt_at is None
    assert raw.error and "kumquat" not in raw.error and "locker" not in raw.error
    failures = failures_of(svc, raw.id)
    assert [e.detail["attempt"] for e in failures] == [1, 2, 3]
    assert not any("kumquat" in json.dumps(e.detail) for e in failures)
    assert svc.get(later.raw_ids[0]).status == "done"
    # the failed turn is still stored verbatim and searchable, so it is listed beside what was extracted
    assert [i.text for i in svc.list_memories("ana").items] == [SECRET, "Ana adopted a greyhound called Pepper"]
    assert svc.get(raw.id).text == SECRET

    calls = len(extracts_of(llm, "kumquat"))
    svc.backfill()
    svc.writer.drain("ana", force=True)
    assert len(extracts_of(llm, "kumquat")) == calls  # a failed request costs nothing more


def test_an_unreachable_llm_backs_off_but_gives_up_no_input(settings, embedder):
    settings.llm_base_url, settings.llm_model = f"http://127.0.0.1:{free_port()}/v1", "scripted"  # nothing listens
    settings.llm_max_retries, settings.llm_retry_base_seconds, settings.writer_max_attempts = 1, 0.01, 2
    svc = MemoryService(settings, embedder=embedder)
    try:
        result = add(svc, "Ana starts at the museum on Monday")
        for _ in range(3):
            svc.backfill()
        raw = raw_row(svc, result.raw_ids[0])
        assert raw.status == "pending" and raw.attempts == 0 and raw.next_attempt_at is not None
        assert "LLMUnreachable" in raw.error or "APIConnectionError" in raw.error
        assert len(failures_of(svc, raw.id)) == 4
    finally:
        svc.close()


def test_a_rate_limited_llm_backs_off_but_gives_up_no_input(writer_service, llm):
    svc = writer_service
    svc.settings.writer_max_attempts = 2
    llm.script.faults = deque(["429"] * 12)  # three calls per try, four tries
    result = add(svc, "Ana starts at the museum on Monday")
    for _ in range(3):
        svc.backfill()
    raw = raw_row(svc, result.raw_ids[0])
    assert raw.status == "pending" and raw.attempts == 0 and "HTTP 429" in raw.error
    assert not llm.script.faults  # every try reached the endpoint
    svc.backfill()  # the limit is lifted
    assert svc.get(raw.id).status == "done"


def test_a_rate_limited_llm_is_asked_again_no_sooner_than_its_retry_after(writer_service, llm):
    llm.script.faults, llm.script.retry_after = deque(["429"]), "2"
    started = time.monotonic()
    result = add(writer_service, "Ana starts at the museum on Monday")
    assert result.status == "done" and time.monotonic() - started >= 2


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_labels_nul_characters_and_far_event_times_are_bounded_before_the_insert(writer_service, llm):
    llm.script.extract = lambda turns: {"items": [{
        "kind": "fact", "text": "Ana flies to\x00 Lima", "topic": "travel" * 12, "type": "plan-" * 20,
        "event_time": "9999-12-31T23:00-05:00"}]}
    result = add(writer_service, "Ana flies to Lima at the very end of time")
    assert result.status == "done"
    with writer_service.db.session() as session:
        item = session.scalars(select(Item)).one()
    assert item.text == "Ana flies to Lima" and item.event_time is None
    assert 0 < len(item.topic) <= 64 and 0 < len(item.type) <= 64


def test_an_update_whose_merged_text_is_over_long_leaves_its_target_as_it_was(writer_service, llm):
    svc = writer_service
    leeds = add(svc, "Ana lives in Leeds").operations[-1].id
    llm.script.reconcile = lambda items: {"decisions": [
        {"item": 1, "op": "UPDATE", "target": items[0][1][0][0], "text": "Ana lives in Leeds. " * 10_000}]}
    result = add(svc, "Ana lives in Leeds near Roundhay Park")
    assert [(o.op, o.text) for o in result.operations if o.op != "RAW"] == [
        ("ADD", "Ana lives in Leeds near Roundhay Park")]  # the new fact is kept, as by a refused target
    assert svc.get(leeds).text == "Ana lives in Leeds" and not svc.get(leeds).revisions


def within_budget(settings, call: dict) -> bool:
    system, user = (m["content"] for m in call["messages"])
    return estimate_tokens(system) + estimate_tokens(user) <= settings.llm_context_tokens - settings.llm_answer_tokens


def test_a_32000_character_turn_reaches_the_llm_within_the_context_budget(writer_service, llm):
    svc = writer_service
    story = "Ana walked the coastal path from Porto to Vigo and wrote about every village. "
    long_turn = (story * 500)[:32_000]
    for _ in range(3):  # long history too
        add(svc, long_turn, infer=False)
    llm.script.extract = lambda turns: {"items": [{"kind": "fact", "text": "Ana walked from Porto to Vigo"}]}
    result = add(svc, long_turn)
    assert result.status == "done"
    call = llm.script.calls[-1]
    assert within_budget(svc.settings, call)
    assert len(call["messages"][0]["content"] + call["messages"][1]["content"]) / 4 <= svc.settings.llm_context_tokens
    assert "Ana walked the coastal path" in new_turns(call)
    assert svc.get(result.raw_ids[0]).text == long_turn  # cut for the LLM, never in the store


def test_a_long_existing_item_is_cut_in_the_reconcile_prompt(writer_service, llm):
    svc = writer_service
    first = add(svc, "Ana collects old maps")
    fact = next(o.id for o in first.operations if o.op == "ADD")
    svc.update_memory(fact, "Ana collects old maps of " + "the Iberian coast, " * 1_500)
    llm.script.reconcile = supersede_first_candidate
    second = add(svc, "Ana collects old maps of Portugal")
    reconcile = [c for c in llm.script.calls if purpose_of(c["messages"][0]["content"]) == "reconcile"]
    assert second.status == "done" and reconcile and within_budget(svc.settings, reconcile[-1])
    assert len(svc.get(fact).text) > 25_000  # the store keeps the whole text


def test_an_update_of_an_item_cut_in_the_prompt_keeps_its_whole_text(writer_service, llm):
    svc = writer_service
    first = add(svc, "Ana collects old maps")
    fact = next(o.id for o in first.operations if o.op == "ADD")
    long_text = "Ana collects old maps of " + "the Iberian coast, " * 1_500
    svc.update_memory(fact, long_text)
    llm.script.reconcile = lambda items: {"decisions": [
        {"item": 1, "op": "UPDATE", "target": items[0][1][0][0], "text": items[0][1][0][1] + " and of Portugal"}]}
    second = add(svc, "Ana collects old maps of Portugal")
    assert [o.op for o in second.operations if o.op != "RAW"] == ["ADD"]
    assert svc.get(fact).text == long_text


class Crash(BaseException):
    """The process dies here (not an error any handler may catch)."""


def current_ids(svc, query: str) -> set[str]:
    vector = svc.embedder.encode_documents([query]).dense[0]
    return {h.id for h in svc.index.query(DENSE, vector, Scope(user_id="ana", kinds=("identity",), current_only=True), 10)}


def test_a_crash_before_the_validity_payload_is_written_is_repaired_at_start_up(settings, embedder, llm):
    settings.llm_base_url, settings.llm_model = llm.url, "scripted"
    llm.script.reconcile = supersede_first_candidate
    svc = MemoryService(settings, embedder=embedder)
    try:
        leeds = next(o.id for o in add(svc, "Ana lives in Leeds").operations if o.op == "ADD")

        def crash(ids, payload):  # type: ignore[no-untyped-def]
            raise Crash()

        svc.index.set_payload = crash  # the rows are committed, the payload write never happens
        with pytest.raises(Crash):
            add(svc, "Ana lives in York")
    finally:
        svc.close()
    restarted = MemoryService(settings, embedder=embedder)
    try:
        york = restarted.list_memories("ana", kind="identity", status="current").items[0]
        assert york.text == "Ana lives in York"
        assert current_ids(restarted, "where does Ana live") == {york.id}
        assert leeds not in current_ids(restarted, "Ana lives in Leeds")
    finally:
        restarted.close()


def test_indexing_a_row_deleted_meanwhile_leaves_no_vector(service):
    stored = add(service, "Ana's spare key is under the blue pot", infer=False)
    raw_id = stored.raw_ids[0]
    with service.db.session() as session:
        snapshot = session.get(RawInput, raw_id)  # what a reindex or an import read a moment ago
    service.delete_memory(raw_id)
    projection.index_rows(service.db, service.index, service.embedder, raws=[snapshot])
    assert service.index.existing([raw_id]) == set()


@pytest.mark.sqlite_only  # writes to the SQLite file directly
def test_an_item_deleted_while_the_writer_indexes_it_gets_no_vector(writer_service, llm):
    svc = writer_service
    upsert = svc.index.upsert
    gone: list[str] = []

    def upsert_after_a_delete(points):  # type: ignore[no-untyped-def]
        items = [p.id for p in points if p.payload.get("kind") == "identity"]
        if items and not gone:  # the row goes between the writer's commit and its upsert
            gone.extend(items)
            with sqlite3.connect(svc.settings.data_dir / "dcpm.db") as conn:
                conn.execute(f"DELETE FROM items WHERE id IN ({','.join('?' * len(items))})", items)
        upsert(points)

    svc.index.upsert = upsert_after_a_delete
    result = add(svc, "Ana keeps her passport in the desk drawer")
    assert result.status == "done" and gone
    assert svc.index.existing(gone) == set()
