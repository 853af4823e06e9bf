"""Metadata filters through dcpm's own API: search asks the vector index (payload filters),
listing asks the store (JSON conditions), and both select the same memories, on SQLite with the
embedded shard and on PostgreSQL with a Qdrant collection."""

from __future__ import annotations

import dataclasses
import json

import httpx
import pytest
from fastapi.testclient import TestClient

from dcpm.api.client import Client
from dcpm.api.models import AddMemoryRequest, SearchRequest
from dcpm.api.models.filters import MAX_FILTER_VALUES
from dcpm.domain import Turn
from dcpm.errors import Invalid
from dcpm.index.base import METADATA, METADATA_BOOLEANS
from dcpm.index.projection import build_points
from dcpm.server.app import create_app
from dcpm.service import MemoryService
from dcpm.store.items import NewItem, add_item
from dcpm.store.models import RawInput
from dcpm.write.raw import touch_user

from .scenarios import at
from .served import served

DISHES = {
    "pizza": Turn(text="I had pizza with the team", metadata={"food": "pizza", "year": 2024, "shared": True},
                  timestamp=at(2025, 1, 3)),
    "sushi": Turn(text="Sushi for my birthday dinner", metadata={"food": "sushi", "year": 2025, "shared": False},
                  timestamp=at(2025, 2, 3)),
    "home": Turn(text="Dinner at home with friends", timestamp=at(2025, 3, 3)),
}


@pytest.fixture
def alex(service) -> dict[str, str]:
    """Alex's turns with metadata, and one extracted item that carries its turn's metadata."""
    service.import_turns("alex", list(DISHES.values()))
    found = {r.text: r.id for r in service.list_memories("alex", kind="raw").items}
    named = {name: found[turn.text] for name, turn in DISHES.items()}
    with service.db.session() as session:
        touch_user(session, "alex")
        item = add_item(session, "alex", NewItem("fact", "Alex loves ramen", valid_from=at(2025, 4, 1),
                                                 metadata={"food": "ramen", "tags": ["noodles", "soup"],
                                                           "shared": 1}))
    service.writer.index_rows(items=[item])
    return {**named, "ramen": item.id}


def searched(service, filters) -> set[str]:
    return {h.id for h in service.search(SearchRequest(user_id="alex", query="food dinner", limit=20, threshold=0,
                                                       filters=filters)).hits}  # every candidate, however weak


def listed(service, filters, **options) -> set[str]:
    return {m.id for m in service.list_memories("alex", metadata=filters, **options).items}


@pytest.mark.storage
@pytest.mark.parametrize("filters, expected", [
    ({"food": "pizza"}, {"pizza"}),
    ({"food": {"ne": "pizza"}}, {"sushi", "home", "ramen"}),
    ({"food": ["sushi", "ramen"]}, {"sushi", "ramen"}),
    ({"food": {"nin": ["sushi", "ramen"]}, "year": {"in": [2024, 2025]}}, {"pizza"}),
    ({"tags": "soup"}, {"ramen"}),  # a list stored under a key matches by its elements
    ({"year": True}, set()),
    ({"shared": True}, {"pizza"}),  # a boolean is matched as a boolean: not the integer 1 of ramen
    ({"shared": False}, {"sushi"}),
    ({"shared": {"ne": True}}, {"sushi", "home", "ramen"}),
    ({"shared": 1}, {"ramen"}),
])
def test_search_and_listing_select_the_same_memories(service, alex, filters, expected):
    wanted = {alex[name] for name in expected}
    assert searched(service, filters) == wanted
    assert listed(service, filters) == wanted


def test_listing_without_a_kind_holds_what_search_finds_each_once(service, alex):
    service.add_memory(AddMemoryRequest(user_id="alex", text="I want to try the new noodle bar"))  # no LLM: waits
    everything = service.list_memories("alex")
    assert everything.total == 5 and [m.kind for m in everything.items] == ["raw", "raw", "raw", "fact", "raw"]
    assert {m.id for m in everything.items} == searched(service, None)
    assert service.list_memories("alex", kind="fact").total == service.list_memories("alex", kind="items").total == 1
    assert service.list_memories("alex", status="superseded").total == 0  # a turn is no revision
    page = service.list_memories("alex", limit=2, offset=3)
    assert [m.text for m in page.items] == ["Alex loves ramen", "I want to try the new noodle bar"]


def test_the_daemon_and_its_client_take_metadata_filters(service, alex):
    with served(create_app(service)) as url:
        client = Client(url)
        found = client.search(user_id="alex", query="dinner", threshold=0, filters={"food": {"ne": "pizza"}})
        assert {h.id for h in found.hits} == {alex["sushi"], alex["home"], alex["ramen"]}
        page = client.list_memories("alex", metadata={"food": {"in": ["pizza", "ramen"]}})
        assert {m.id for m in page.items} == {alex["pizza"], alex["ramen"]}
        with pytest.raises(Invalid, match="metadata.food.one of"):
            client.list_memories("alex", metadata={"food": []})  # refused before it is sent
        refused = httpx.get(f"{url}/v1/users/alex/items", params={"metadata": '{"food": {"like": "pi"}}'})
        assert refused.status_code == 422
        assert refused.json()["detail"] == "metadata.food.operators.like: Extra inputs are not permitted"


def test_reindex_gives_points_indexed_before_metadata_filters_their_metadata(service, alex):
    with service.db.session() as session:
        pizza = session.get(RawInput, alex["pizza"])
    old = [dataclasses.replace(p, payload={k: v for k, v in p.payload.items() if k != METADATA})
           for p in build_points(service.embedder, raws=[pizza])]
    service.index.upsert(old)  # as an earlier version indexed it
    assert searched(service, {"food": "pizza"}) == set()
    service.reindex()
    assert searched(service, {"food": "pizza"}) == {alex["pizza"]}


def test_the_upgrade_lets_search_filter_on_booleans_indexed_before(service, alex):
    """Points written before kept no keyword copy of their booleans; migration 0010 marks their rows
    and start-up repair rewrites them, so a boolean filter finds them without a reindex."""
    from sqlalchemy import text

    with service.db.session() as session:
        pizza = session.get(RawInput, alex["pizza"])
    old = [dataclasses.replace(p, payload={k: v for k, v in p.payload.items() if k != METADATA_BOOLEANS})
           for p in build_points(service.embedder, raws=[pizza])]
    service.index.upsert(old)  # as an earlier version indexed it
    with service.db.session() as session:
        session.execute(text("UPDATE alembic_version SET version_num = '0009'"))
    settings, embedder = service.settings, service.embedder
    service.close()
    reopened = MemoryService(settings, embedder=embedder)  # migrates, then repairs
    try:
        assert searched(reopened, {"shared": True}) == {alex["pizza"]}
    finally:
        reopened.close()


@pytest.mark.parametrize("condition", [{}, {"eq": None}, {"in": None, "nin": None}])
def test_a_condition_with_no_operator_is_refused_not_read_as_every_memory(service, alex, condition):
    """{"food": {"eq": null}} (a client's unset variable) used to select nothing by food: search,
    listing and Mem0 answered every memory of the user as if they matched."""
    with TestClient(create_app(service)) as api:
        answers = [
            api.post("/v1/search", json={"user_id": "alex", "query": "dinner", "filters": {"food": condition}}),
            api.get("/v1/users/alex/items", params={"metadata": json.dumps({"food": condition})}),
            api.post("/v3/memories/search/", json={"user_id": "alex", "query": "dinner",
                                                   "filters": {"metadata": {"food": condition}}}),
            api.post("/v3/memories/", json={"user_id": "alex", "filters": {"metadata": {"food": condition}}}),
        ]
    for answer in answers:
        assert answer.status_code == 422, (answer.request.url, answer.text)
        assert "food" in answer.json()["message"] and "eq, ne, in or nin" in answer.json()["message"]


@pytest.mark.parametrize("condition", [{"nin": [f"dish {n}" for n in range(1000)]},
                                       [f"dish {n}" for n in range(1000)],
                                       {"in": list(range(1000))}])
def test_a_filter_of_too_many_values_is_refused_and_one_at_the_bound_is_served(service, alex, condition):
    """A thousand values used to make the listing's SQL deeper than SQLite takes (a 500), and a
    `nin` of 100,000 values held a search for half a minute."""
    too_many = {"food": condition}
    at_the_bound = {"food": {"nin": [f"dish {n}" for n in range(MAX_FILTER_VALUES)]}}
    with TestClient(create_app(service)) as api:
        for filters, status in ((too_many, 422), (at_the_bound, 200)):
            answers = [api.post("/v1/search", json={"user_id": "alex", "query": "dinner", "filters": filters}),
                       api.get("/v1/users/alex/items", params={"metadata": json.dumps(filters)}),
                       api.post("/v3/memories/", json={"user_id": "alex", "filters": {"metadata": filters}})]
            for answer in answers:
                assert answer.status_code == status, (answer.request.url, answer.text[:300])
        refused = api.get("/v1/users/alex/items", params={"metadata": json.dumps(too_many)})
    assert f"at most {MAX_FILTER_VALUES} values" in refused.json()["message"]
