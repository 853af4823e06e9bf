"""Values a JSON body can carry but nothing after the row can hold: metadata nested hundreds of
levels deep or holding NaN or a 100-bit integer, text with a lone surrogate, a date whose UTC
time is past year 9999, numbers past 64 bits in filters and pages, a question about "3000 years
ago". Each used to be stored and then break what came after it (a 500 on every listing of the
user, a vector log that no start could read, a reindex that emptied the index), or answer 500
itself. Now each is a 4xx that changes nothing (or, for the question, an answer), and the store
serves every user as before, after a restart too."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from dcpm.api.models import SearchRequest
from dcpm.server.app import create_app
from dcpm.service import MemoryService
from dcpm.store.models import RawInput

from .scenarios import ANA_TURNS, BOB_TURNS

BEES = "I keep bees on my allotment"


def nested(depth: int) -> dict:
    value: dict = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


@pytest.fixture
def api(service):
    with TestClient(create_app(service)) as client:
        assert client.post("/v1/memories", json={"user_id": "ana", "text": BEES, "infer": False}).status_code == 201
        yield client


def still_serving(api) -> None:  # type: ignore[no-untyped-def]
    listed = api.get("/v1/users/ana/items", params={"kind": "raw"})
    assert listed.status_code == 200 and [m["text"] for m in listed.json()["items"]] == [BEES]
    hits = api.post("/v1/search", json={"user_id": "ana", "query": "honey bees"}).json()["hits"]
    assert hits[0]["text"] == BEES


SURROGATE = '"\\ud800"'  # a JSON escape of a lone surrogate: valid JSON, not valid Unicode


@pytest.mark.parametrize("body, fragment", [
    ('{"user_id": "ana", "text": "x", "infer": false, "metadata": %s}' % json.dumps(nested(500)), "deeper than 32"),
    ('{"user_id": "ana", "text": "x", "infer": false, "metadata": {"n": NaN}}', "finite"),
    ('{"user_id": "ana", "text": "x", "infer": false, "metadata": {"n": Infinity}}', "finite"),
    ('{"user_id": "ana", "text": "x", "infer": false, "metadata": {"n": %d}}' % 10**30, "64 bits"),
    ('{"user_id": "ana", "text": %s, "infer": false}' % SURROGATE, "unicode"),
    ('{"user_id": "ana", "text": "x", "infer": false, "metadata": {"k": %s}}' % SURROGATE, "unicode"),
    ('{"user_id": "ana", "infer": false, "messages": [{"content": "x", "name": %s}]}' % SURROGATE, "unicode"),
    ('{"user_id": "ana", "text": "x", "infer": false, "timestamp": "9999-12-31T23:59:59-12:00"}', "out of range"),
    ('{"user_id": "ana", "infer": false, "messages": [{"content": "x", "timestamp": "0001-01-01T00:00:00+14:00"}]}',
     "out of range"),
])
def test_a_value_no_store_can_hold_is_refused_and_changes_nothing(api, service, settings, embedder, body, fragment):
    refused = api.post("/v1/memories", content=body, headers={"content-type": "application/json"})
    assert refused.status_code == 422 and fragment in refused.json()["message"].lower()
    still_serving(api)


def test_text_of_zero_width_characters_is_empty_and_a_key_label_takes_no_nul(api):
    assert api.post("/v1/memories", json={"user_id": "ana", "text": "\u200b\u200b", "infer": False}).status_code == 422
    assert api.post("/v1/admin/keys", json={"user_id": "ana", "label": "bot\u0000"}).status_code == 422
    assert api.get("/v1/admin/keys").json() == []
    still_serving(api)


@pytest.mark.parametrize("metadata", [json.dumps(nested(500)), '{"n": NaN}', '{"n": %d}' % 10**30,
                                      '{"k": %s}' % SURROGATE])
def test_mem0_add_refuses_the_same_metadata(api, metadata):
    body = '{"user_id": "ana", "infer": false, "messages": [{"role": "user", "content": "x"}], "metadata": %s}'
    refused = api.post("/v3/memories/add/", content=body % metadata, headers={"content-type": "application/json"})
    assert refused.status_code == 422, refused.text
    still_serving(api)


@pytest.mark.parametrize("path, body, params", [
    ("/v1/search", {"user_id": "ana", "query": "bees", "filters": {"n": 2**63}}, None),
    ("/v1/search", {"user_id": "ana", "query": "bees", "filters": {"n": {"in": [2**64]}}}, None),
    ("/v3/memories/", {"user_id": "ana"}, {"page": 2**63 - 1}),
])
def test_numbers_past_64_bits_in_filters_and_pages_are_a_4xx(api, path, body, params):
    response = api.post(path, json=body, params=params)
    assert response.status_code == 422, response.text
    assert api.get("/v1/users/ana/items", params={"offset": 2**63}).status_code == 422
    assert api.get("/v1/users/ana/items", params={"metadata": json.dumps({"n": 10**30})}).status_code == 422
    still_serving(api)


@pytest.mark.parametrize("query", ["what did I do 3000 years ago", "1000000 weeks ago", "800000 days ago"])
def test_a_question_about_a_time_before_any_date_is_answered(api, query):
    response = api.post("/v1/search", json={"user_id": "ana", "query": query})
    assert response.status_code == 200


@pytest.mark.parametrize("as_of, query", [
    ("9999-12-31T23:59:59Z", "what did I do on December 31"),
    ("9999-12-31T23:59:59Z", "the week after December 30"),
    ("0001-01-01T12:00:00Z", "what did I do yesterday"),
    ("0001-01-01T12:00:00Z", "what happened last year"),
    ("0001-02-01T12:00:00Z", "in December"),
])
def test_a_question_whose_time_falls_off_the_calendar_as_of_its_moment_is_answered(api, as_of, query):
    """A time the question names, read as of the first or last day there is, may lie before
    year 1 or after 9999 ('December 31' as of 9999-12-31 reaches into 10000): it aligns nothing
    and the search answers, where it used to be a 500."""
    said = {"user_id": "ana", "text": "I rang in the year on the roof", "infer": False, "timestamp": as_of[:10]}
    assert api.post("/v1/memories", json=said).status_code == 201
    response = api.post("/v1/search", json={"user_id": "ana", "query": query, "as_of": as_of})
    assert response.status_code == 200, response.text
    assert "I rang in the year on the roof" in [hit["text"] for hit in response.json()["hits"]]


def test_a_search_with_a_lone_surrogate_is_a_4xx(api):
    response = api.post("/v1/search", content='{"user_id": "ana", "query": "bees %s"}' % SURROGATE[1:-1],
                        headers={"content-type": "application/json"})
    assert response.status_code == 422 and "Unicode" in response.json()["message"]


def test_one_row_the_index_refuses_does_not_stop_repair_or_reindex(service, settings, embedder, caplog):
    """A row stored before these checks (NaN metadata, written straight into the store here):
    start-up repair and reindex index every other row and log that one, where they used to stop
    at it, leaving every user without search (reindex had emptied the index first)."""
    service.import_turns("ana", list(ANA_TURNS))
    service.import_turns("bob", list(BOB_TURNS))
    poisoned = service.list_memories("bob", kind="raw").items[0].id
    with service.db.session() as session:
        session.execute(update(RawInput).where(RawInput.id == poisoned)
                        .values(meta={"n": float("nan")}, indexed_at=None))
    service.index.delete([poisoned])

    assert service.reindex() == len(ANA_TURNS) + len(BOB_TURNS) - 1
    assert poisoned in caplog.text
    service.close()
    again = MemoryService(settings, embedder=embedder)  # start-up repair meets the same row
    try:
        hits = again.search(SearchRequest(user_id="ana", query="greyhound")).hits
        assert hits and "greyhound" in hits[0].text
        assert again.index.count("bob") == len(BOB_TURNS) - 1
    finally:
        again.close()


def test_a_consent_update_naming_no_layer_dcpm_has_is_refused(api):
    """Withdrawing consent with a misspelt layer ("core_schema") used to answer 200 and leave the
    layer switched on: the unknown field was dropped, so the user believed consent withdrawn."""
    assert api.put("/v1/users/ana/consent", json={"core_schemas": True}).json()["core_schemas"] is True
    refused = api.put("/v1/users/ana/consent", json={"core_schema": False})
    assert refused.status_code == 422 and "core_schema" in refused.json()["message"]
    assert api.get("/v1/users/ana/consent").json()["core_schemas"] is True
    assert api.put("/v1/users/ana/consent", json={"core_schemas": False}).json()["core_schemas"] is False


@pytest.mark.parametrize("session", ["..", "."])
def test_a_session_id_no_url_can_name_is_refused(api, session):
    """DELETE /v1/users/ana/sessions/.. reaches the daemon as DELETE /v1/users/ana from any
    standard HTTP client or browser, so a session stored as '..' could only be deleted by deleting
    everything of its user."""
    turn = {"text": "We planned the trip", "session_id": session}
    refused = [api.post("/v1/memories", json={"user_id": "ana", "infer": False, **turn}),
               api.post("/v1/import", json={"user_id": "ana", "turns": [
                   {**turn, "id": "00000000-0000-4000-8000-000000000001"}]}),
               api.post("/v3/memories/add/", json={"user_id": "ana", "run_id": session, "infer": False,
                                                   "messages": [{"role": "user", "content": turn["text"]}]})]
    for answer in refused:
        assert answer.status_code == 422, (answer.request.url, answer.text)
        assert "session id" in answer.json()["message"]
    still_serving(api)


def test_a_misspelt_field_is_refused_rather_than_ignored(api):
    """`"filter"` for `"filters"` used to search unfiltered: the unknown field was dropped, and
    the answer held memories the caller had asked to leave out."""
    api.post("/v1/memories", json={"user_id": "ana", "infer": False, "text": "We ate pizza in Naples",
                                   "metadata": {"food": "pizza"}})
    refused = api.post("/v1/search", json={"user_id": "ana", "query": "pizza", "filter": {"food": "sushi"}})
    assert refused.status_code == 422 and "filter" in refused.json()["message"]
    added = api.post("/v1/memories", json={"user_id": "ana", "infer": False, "text": "Sushi on Friday",
                                           "metdata": {"food": "sushi"}})
    assert added.status_code == 422 and "metdata" in added.json()["message"]
    texts = [m["text"] for m in api.get("/v1/users/ana/items").json()["items"]]
    assert "We ate pizza in Naples" in texts and "Sushi on Friday" not in texts  # the refused add stored nothing
    found = api.post("/v1/search", json={"user_id": "ana", "query": "pizza", "filters": {"food": "sushi"}})
    assert found.status_code == 200 and found.json()["hits"] == []
