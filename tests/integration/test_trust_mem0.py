"""Hostile Mem0 filters: nesting deep enough to exhaust the parser's stack is refused with a
clear 4xx, never a server error, whether it comes in the body or in the query string."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from dcpm.server.app import create_app

from .scenarios import ana_drinks_chain

HEADERS = {"Authorization": "Token anything"}
JSON = {**HEADERS, "content-type": "application/json"}


def search(filters: str) -> str:
    return '{"query": "bees", "filters": ' + filters + "}"


def nested(depth: int) -> str:
    """The filters as JSON text, written out by hand: too deep for Python's own encoder."""
    return '{"AND": [' * depth + '{"user_id": "ana"}' + "]}" * depth


def test_deeply_nested_filters_are_refused_not_a_server_error(service):
    with TestClient(create_app(service)) as api:
        api.post("/v1/memories", json={"user_id": "ana", "text": "Ana keeps bees", "infer": False})
        shallow = api.post("/v3/memories/search/", content=search(nested(3)), headers=JSON)
        assert shallow.status_code == 200, shallow.text
        for depth in (50, 2000):  # 2000: past Python's recursion limit
            body = api.post("/v3/memories/search/", content=search(nested(depth)), headers=JSON)
            assert 400 <= body.status_code < 500, (depth, body.status_code)
            query = api.delete("/v1/memories/", params={"filters": nested(depth)}, headers=HEADERS)
            assert 400 <= query.status_code < 500, (depth, query.status_code)
        assert api.post("/v1/search", json={"user_id": "ana", "query": "bees"}).json()["hits"]


def test_filters_in_the_query_string_with_an_unhashable_key_are_a_4xx_and_delete_nothing(service):
    """`filters` in a query parameter is read as JSON or as a Python literal; a literal dict keyed
    by a list or a dict ({[]: 1}) parses but cannot be built, which used to answer 500."""
    with TestClient(create_app(service)) as api:
        api.post("/v1/memories", json={"user_id": "ana", "text": "Ana keeps bees", "infer": False})
        for filters in ("{[]: 1}", "{{}: 1}", "{'user_id': 'ana', 'AND': [{[1]: 2}]}"):
            refused = api.delete("/v1/memories/", params={"filters": filters}, headers=HEADERS)
            assert refused.status_code == 422, (filters, refused.status_code, refused.text)
            assert "filters must be a JSON object" in refused.json()["message"]
        assert api.post("/v1/search", json={"user_id": "ana", "query": "bees"}).json()["hits"]


@pytest.mark.parametrize("extra", [{"metadata": {"priority": "high"}}, {"expiration_date": "2030-01-01"},
                                   {"timestamp": 1767225600}])
def test_an_update_asking_for_more_than_new_text_is_refused_not_half_done(service, extra):
    """MemoryClient.update(id, text=..., metadata=...) used to answer 200 with the new text and the
    metadata (or expiry, or time) dropped, so the caller believed it changed."""
    coffee, black, green = ana_drinks_chain(service)
    with TestClient(create_app(service)) as api:
        refused = api.put(f"/v1/memories/{green.id}/", json={"text": "Ana drinks mate", **extra}, headers=HEADERS)
        assert refused.status_code == 422, refused.text
        assert next(iter(extra)) in refused.json()["message"]
        assert api.get(f"/v1/memories/{green.id}/", headers=HEADERS).json()["memory"] == green.text
        kept = api.put(f"/v1/memories/{green.id}/", json={"text": "Ana drinks mate", "expiration_date": None},
                       headers=HEADERS)  # what the client sends for update(id, text=..., expiration_date=None)
        assert kept.status_code == 200 and kept.json()["memory"] == "Ana drinks mate"


@pytest.mark.parametrize("path, body, field", [
    ("/v3/memories/search/", {"query": "bees", "top_k": 0}, "top_k"),
    ("/v3/memories/search/", {"query": "bees", "top_k": 100_000}, "top_k"),
    ("/v3/memories/add/", {"messages": [{"role": "user", "content": "hi"}], "run_id": "r" * 200}, "run_id"),
])
def test_a_refused_mem0_request_names_the_field_the_client_sent(service, path, body, field):
    """Mem0's top_k and run_id are dcpm's limit and session_id; refusals used to name dcpm's."""
    with TestClient(create_app(service)) as api:
        api.post("/v1/memories", json={"user_id": "ana", "text": "Ana keeps bees", "infer": False})
        refused = api.post(path, json={"user_id": "ana", "infer": False, **body}, headers=HEADERS)
    assert refused.status_code == 422, refused.text
    assert refused.json()["message"].startswith(field), refused.json()["message"]
