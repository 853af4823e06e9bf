"""HTTP contract: bad requests get a 4xx with a message and change nothing."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from dcpm.server.app import create_app


@pytest.fixture
def api(service):
    with TestClient(create_app(service)) as client:
        client.post("/v1/memories", json={"user_id": "ana", "infer": False,
                                          "messages": [{"content": "I keep bees on my allotment", "name": "Ana"}]})
        yield client


def raw_count(api) -> int:
    return api.get("/v1/users/ana/items", params={"kind": "raw"}).json()["total"]


@pytest.mark.parametrize("body, status, fragment", [
    ({"user_id": "ana", "text": ""}, 422, "text is empty"),
    ({"user_id": "ana", "text": "   "}, 422, "text is empty"),
    ({"user_id": "ana"}, 422, "give `messages` or `text`"),
    ({"user_id": "ana", "messages": []}, 422, "messages is empty"),
    ({"user_id": "../etc", "text": "hi"}, 422, "user_id"),
    ({"user_id": "ana", "text": "x" * 40_000}, 422, "limit"),
    ({"user_id": "ana", "messages": [{"content": "hi"}] * 500}, 422, "too many messages"),
    ({"user_id": "ana", "text": "hi", "timestamp": "not a date"}, 422, "timestamp"),
    ({"user_id": "ana", "text": "a\u0000b"}, 422, "NUL"),
])
def test_bad_add_memory_is_refused_and_changes_nothing(api, body, status, fragment):
    response = api.post("/v1/memories", json=body)
    assert response.status_code == status
    assert fragment in response.json()["message"]
    assert raw_count(api) == 1


def test_malformed_json_body_is_a_4xx(api):
    response = api.post("/v1/memories", content=b'{"user_id": "ana", "text": ',
                        headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert raw_count(api) == 1


@pytest.mark.parametrize("content, content_type, fragment", [
    (b'{"user_id": "ana",}', "application/json", "the body is not valid JSON: Expecting property name"),
    (None, None, "needs a JSON object as its body"),
    (b'{"user_id": "ana", "text": "hi"}', "application/x-www-form-urlencoded", "content-type: application/json"),
    (b'{"user_id": "ana", "text": "hi"}', "text/plain", "content-type: application/json"),
    (b'["ana", "hi"]', "application/json", "the body must be a JSON object"),
    ('{"user_id": "ana", "text": "caf\u00e9"}'.encode("latin-1"), "application/json", "not UTF-8"),
    (b'{"user_id": "ana", "text": "hi", "metadata": {"n": %s}}' % (b"9" * 5000), "application/json",
     "the body could not be read as JSON: Exceeds the limit (4300 digits)"),
])
def test_a_body_that_is_no_json_object_is_refused_saying_what_to_send(api, content, content_type, fragment):
    """`curl -d` without a content-type, a trailing comma, no body at all: these used to answer
    'Input should be a valid dictionary...', '17: JSON decode error' or 'Field required'."""
    headers = {"content-type": content_type} if content_type else {}
    response = api.post("/v1/memories", content=content, headers=headers)
    assert 400 <= response.status_code < 500 and fragment in response.json()["message"], response.text
    assert raw_count(api) == 1


def test_oversized_body_is_refused_before_reading(api, settings):
    response = api.post("/v1/memories", content=b"x", headers={"content-length": str(settings.max_body_bytes + 1),
                                                                 "content-type": "application/json"})
    assert response.status_code == 413


@pytest.mark.parametrize("body, fragment", [
    ({"user_id": "ana", "query": ""}, "query is empty"),
    ({"user_id": "ana", "query": "bees", "limit": 0}, "limit"),
    ({"user_id": "ana", "query": "bees", "limit": 100000}, "maximum"),
    ({"user_id": "ana", "query": "bees", "kinds": ["secrets"]}, "kinds"),
])
def test_bad_search_is_a_4xx(api, body, fragment):
    response = api.post("/v1/search", json=body)
    assert response.status_code == 422
    assert fragment in response.json()["message"]


def test_unknown_user_and_unknown_item_are_404(api):
    assert api.post("/v1/search", json={"user_id": "zoe", "query": "bees"}).status_code == 404
    assert api.get("/v1/users/zoe/items").status_code == 404
    assert api.get("/v1/items/00000000-0000-0000-0000-000000000000").status_code == 404
    assert api.get("/v1/items/not-an-id").status_code == 422


def test_search_hit_carries_id_kind_text_score_time_session(api):
    hit = api.post("/v1/search", json={"user_id": "ana", "query": "honey bees"}).json()["hits"][0]
    assert {"id", "kind", "text", "score", "timestamp", "created_at", "session_id", "metadata"} <= hit.keys()
    assert hit["text"] == "I keep bees on my allotment"


def test_token_is_required_when_configured(service):
    service.settings.api_token = type(service.settings.api_token)("s3cret")
    with TestClient(create_app(service)) as client:
        assert client.post("/v1/search", json={"user_id": "ana", "query": "x"}).status_code == 401
        assert client.get("/v1/users", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert client.get("/healthz").status_code == 200


def test_openapi_page_is_served(api):
    assert api.get("/docs").status_code == 200
    assert "/v1/search" in api.get("/openapi.json").json()["paths"]
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js"):
        assert api.get(f"/docs/assets/{asset}").status_code == 200, asset


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_openapi_pages_load_nothing_from_another_origin(api, page):
    answer = api.get(page)
    assert answer.status_code == 200
    policy = answer.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "http" not in policy
    assert "cdn" not in answer.text and "googleapis" not in answer.text


def test_healthz_reports_each_component(api):
    report = api.get("/healthz").json()
    assert report["store"]["ok"] and report["index"]["ok"] and report["embedder"]["dim"] == 384
    assert report["llm"]["configured"] is False


@pytest.mark.parametrize("spell", [str.upper, lambda i: "{" + i + "}", lambda i: "urn:uuid:" + i.upper()],
                         ids=["upper", "braces", "urn"])
def test_a_memory_id_in_another_spelling_of_its_uuid_reaches_that_memory(api, spell):
    """Ids are UUIDs, stored in their one lower-case form; a client that prints them in upper case
    (or in braces) reads, edits and deletes the same memory, on the native and the Mem0 routes."""
    stored = api.get("/v1/users/ana/items", params={"kind": "raw"}).json()["items"][0]["id"]
    assert api.get(f"/v1/items/{spell(stored)}").json()["id"] == stored
    assert api.get(f"/v1/memories/{spell(stored)}/").json()["id"] == stored
    history = api.get(f"/v1/memories/{stored}/history/")  # a raw turn has none: the same 422 either way
    assert api.get(f"/v1/memories/{spell(stored)}/history/").json() == history.json()
    assert api.delete(f"/v1/items/{spell(stored)}").status_code == 200
    assert api.get(f"/v1/items/{stored}").status_code == 404 and raw_count(api) == 0
