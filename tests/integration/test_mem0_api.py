"""The Mem0 platform routes as the published `mem0ai` MemoryClient sees them (no LLM here; the
extraction and chain flow runs end to end in tests/e2e/test_mem0_client.py)."""

from __future__ import annotations

import os
import tempfile

import pytest
from pydantic import SecretStr

os.environ.setdefault("MEM0_TELEMETRY", "False")  # read when mem0 is imported
os.environ.setdefault("MEM0_DIR", os.path.join(tempfile.gettempdir(), "dcpm-tests-mem0"))  # it writes config there

from mem0 import MemoryClient  # noqa: E402
from mem0.exceptions import MemoryNotFoundError, ValidationError  # noqa: E402

from dcpm.server.app import create_app  # noqa: E402
from dcpm.service import MemoryService  # noqa: E402

from .served import served  # noqa: E402

KEY = "dcpm-test-key"


@pytest.fixture
def url(settings, embedder):
    settings.api_token = SecretStr(KEY)
    service = MemoryService(settings, embedder=embedder)
    try:
        with served(create_app(service)) as address:
            yield address
    finally:
        service.close()


@pytest.fixture
def mem0(url):
    return MemoryClient(api_key=KEY, host=url)


def test_a_client_with_a_wrong_key_is_refused_when_it_starts(url):
    with pytest.raises(ValueError, match="wrong admin token or unknown API key"):  # the body's `detail`
        MemoryClient(api_key="not-the-key", host=url)


def test_turns_stored_without_inference_are_memories_that_search_finds(mem0):
    added = mem0.add("I keep bees on my allotment", user_id="ana", infer=False)
    assert added["status"] == "SUCCEEDED" and added["results"][0]["event"] == "ADD"
    memory_id = added["results"][0]["id"]
    hits = mem0.search("bees", filters={"user_id": "ana"})["results"]
    assert hits[0]["id"] == memory_id and hits[0]["memory"] == "I keep bees on my allotment"
    assert mem0.get(memory_id)["user_id"] == "ana"
    assert mem0.get_all(filters={"user_id": "ana"}, kind="raw")["count"] == 1


def test_an_unknown_user_reads_as_empty(mem0):
    assert mem0.search("anything", filters={"user_id": "nobody"})["results"] == []
    assert mem0.get_all(filters={"user_id": "nobody"}) == {"count": 0, "next": None, "previous": None, "results": []}
    assert mem0.users()["results"] == []


@pytest.mark.parametrize("filters, fragment", [
    ({"user_id": "ana", "categories": {"in": ["travel"]}}, "unsupported filter 'categories'"),
    ({"OR": [{"user_id": "ana"}, {"user_id": "bob"}]}, "OR filters"),
    ({"run_id": "s1"}, "name one user_id"),
])
def test_scopes_dcpm_cannot_honour_are_refused_with_a_message(mem0, filters, fragment):
    with pytest.raises(ValidationError, match=fragment):
        mem0.search("bees", filters=filters)


def test_delete_all_takes_filters_as_the_client_sends_them(mem0):
    mem0.add("I keep bees", user_id="ana", infer=False)
    mem0.add("I keep goats", user_id="bob", infer=False)
    assert mem0.delete_all(filters={"user_id": "ana"})["raw_inputs"] == 1
    assert [e["name"] for e in mem0.users()["results"]] == ["bob"]
    with pytest.raises(ValidationError, match="user_id"):
        mem0.delete_all()  # never everything at once


def test_reset_deletes_every_user_through_the_entity_routes(mem0):
    mem0.add("I keep bees", user_id="ana", infer=False)
    mem0.add("I keep goats", user_id="bob", infer=False)
    mem0.reset()
    assert mem0.users()["results"] == []
    with pytest.raises(MemoryNotFoundError):
        mem0.get("00000000-0000-4000-8000-000000000000")


def ids(answer: dict) -> set[str]:
    return {memory["id"] for memory in answer["results"]}


def test_without_an_llm_listing_shows_the_turns_that_search_finds(mem0):
    waiting = mem0.add("I keep bees on my allotment", user_id="ana")  # no LLM: stored, extraction waits
    verbatim = mem0.add("My allotment is in Leeds", user_id="ana", infer=False)
    assert waiting["status"] == "PENDING" and waiting["results"] == []
    found = mem0.search("allotment bees Leeds", filters={"user_id": "ana"}, threshold=0)
    listed = mem0.get_all(filters={"user_id": "ana"})
    assert listed["count"] == 2 and ids(listed) == ids(found) == set(waiting["raw_ids"] + verbatim["raw_ids"])
    assert [m["memory"] for m in listed["results"]] == ["I keep bees on my allotment", "My allotment is in Leeds"]
    assert ids(mem0.get_all(filters={"user_id": "ana"}, latest_only=True)) == ids(listed)  # turns have no revisions


@pytest.fixture
def dishes(mem0):
    """Alex's turns with metadata, as a Mem0 application stores them."""
    stored = {}
    for text, metadata in (("I had pizza with the team", {"food": "pizza", "year": 2024}),
                           ("Sushi for my birthday dinner", {"food": "sushi", "year": 2025}),
                           ("Ramen after the concert", {"food": "ramen", "year": 2025}),
                           ("Dinner at home with friends", {})):
        stored[text.split()[0] if metadata else "home"] = mem0.add(text, user_id="alex", metadata=metadata,
                                                                   infer=False)["results"][0]["id"]
    return stored


@pytest.mark.parametrize("metadata, expected", [
    ({"food": "pizza"}, {"I"}),
    ({"food": {"eq": "sushi"}}, {"Sushi"}),
    ({"food": {"ne": "pizza"}}, {"Sushi", "Ramen", "home"}),  # a memory without the key holds no pizza
    ({"food": {"in": ["pizza", "ramen"]}}, {"I", "Ramen"}),
    ({"food": {"nin": ["pizza", "ramen"]}}, {"Sushi", "home"}),
    ({"year": 2025, "food": {"ne": "ramen"}}, {"Sushi"}),
    ({"year": "2025"}, set()),  # values are compared type included
])
def test_metadata_filters_select_the_same_memories_in_search_and_listing(mem0, dishes, metadata, expected):
    filters = {"AND": [{"user_id": "alex"}, {"metadata": metadata}]}
    wanted = {dishes[name] for name in expected}
    assert ids(mem0.search("dinner food", filters=filters, top_k=10, threshold=0)) == wanted
    assert ids(mem0.get_all(filters=filters)) == wanted


def test_a_refused_filter_reaches_the_client_as_the_bodys_detail(mem0, dishes):
    with pytest.raises(ValidationError) as refused:
        mem0.search("food", filters={"AND": [{"user_id": "alex"}, {"metadata": {"food": {"contains": "pi"}}}]})
    assert refused.value.message == "metadata.food.operators.contains: Extra inputs are not permitted"


def test_an_agents_own_memories_are_apart_from_every_users(mem0):
    agent = mem0.add("Travellers ask about train strikes", agent_id="travel-agent", infer=False)["results"][0]["id"]
    mem0.add("I am travelling to Lisbon by train", user_id="ana", infer=False)
    planned = mem0.add("Ana's trip is planned for May", user_id="ana", agent_id="travel-agent",
                       infer=False)["results"][0]["id"]

    assert ids(mem0.search("train", filters={"agent_id": "travel-agent"}, threshold=0.0)) == {agent}
    assert agent not in ids(mem0.search("train strikes", filters={"user_id": "ana"}, threshold=0.0))
    assert ids(mem0.get_all(filters={"AND": [{"user_id": "ana"}, {"agent_id": "travel-agent"}]})) == {planned}
    own = mem0.get(agent)
    assert (own["user_id"], own["agent_id"]) == (None, "travel-agent")
    assert mem0.get(planned)["user_id"] == "ana" and mem0.get(planned)["agent_id"] == "travel-agent"
    assert {(e["type"], e["name"]) for e in mem0.users()["results"]} == {("user", "ana"), ("agent", "travel-agent")}

    mem0.delete_users(agent_id="travel-agent")
    assert mem0.get_all(filters={"agent_id": "travel-agent"})["count"] == 0
    assert mem0.get_all(filters={"user_id": "ana"})["count"] == 2


def test_an_entitys_total_memories_is_what_its_listing_holds(mem0):
    mem0.add("I keep bees on my allotment", user_id="ana")  # no LLM: the turns wait, listed as they are
    mem0.add("My allotment is in Leeds", user_id="ana")
    mem0.add("I sell the honey", user_id="ana", infer=False)
    listed = mem0.get_all(filters={"user_id": "ana"})
    [ana] = mem0.users()["results"]
    assert ana["total_memories"] == listed["count"] == len(listed["results"]) == 3


def test_a_metadata_key_named_agent_id_stays_metadata_and_names_no_agent(mem0):
    spoof = mem0.add("I keep bees", user_id="ana", metadata={"agent_id": "evil"}, infer=False)["results"][0]["id"]
    real = mem0.add("Ana's bees swarmed in May", user_id="ana", agent_id="travel-agent", metadata={"agent_id": "evil"},
                    infer=False)["results"][0]["id"]
    ana = {"user_id": "ana"}
    shown = [mem0.get(spoof), mem0.get(real), *mem0.get_all(filters=ana)["results"],
             *mem0.search("bees", filters=ana, threshold=0.0)["results"]]
    assert len(shown) == 6
    assert {(m["id"], m["agent_id"], m["metadata"]["agent_id"]) for m in shown} == {
        (spoof, None, "evil"), (real, "travel-agent", "evil")}
    assert ids(mem0.search("bees", filters={"AND": [ana, {"agent_id": "evil"}]}, threshold=0.0)) == set()
    with pytest.raises(ValidationError, match="'dcpm_agent_id'; keys beginning 'dcpm_' are dcpm's own"):
        mem0.add("I keep wasps", user_id="ana", metadata={"dcpm_agent_id": "evil"}, infer=False)


def test_a_unix_timestamp_reads_alike_in_seconds_or_milliseconds_on_both_apis(mem0):
    said = []
    for when in (1700000000, 1700000000000, "1700000000"):
        said.append(mem0.add("I keep bees", user_id="ana", infer=False, timestamp=when)["results"][0]["id"])
    native = mem0.client.post("/v1/memories", json={"user_id": "ana", "text": "I keep bees", "infer": False,
                                                     "timestamp": 1700000000000})
    said.append(native.json()["raw_ids"][0])
    assert {mem0.get(memory_id)["valid_from"][:19] for memory_id in said} == {"2023-11-14T22:13:20"}
    for refused, fragment in ((True, "valid datetime"), (10**20, "after 9999")):
        with pytest.raises(ValidationError, match=fragment):
            mem0.add("I keep bees", user_id="ana", infer=False, timestamp=refused)


def test_memories_namespaced_before_the_upgrade_keep_their_agent(settings, embedder):
    """Before migration 0008 an add kept its agent namespace under the metadata key `agent_id`;
    after the upgrade such a memory still shows its agent and a filter by agent still finds it
    (start-up repair rewrites its point under the new key)."""
    from datetime import datetime, timezone

    from fastapi.testclient import TestClient
    from sqlalchemy import text

    from dcpm.domain import Turn

    service = MemoryService(settings, embedder=embedder)
    try:  # what an add with agent_id beside user_id stored before: the namespace as plain metadata
        service.import_turns("ana", [Turn(text="Ana's bees swarmed in May", speaker="Ana", metadata={
            "agent_id": "travel-agent", "hive": 3}, timestamp=datetime(2025, 5, 2, tzinfo=timezone.utc))])
        with service.db.session() as session:
            session.execute(text("UPDATE alembic_version SET version_num = '0007'"))
    finally:
        service.close()
    service = MemoryService(settings, embedder=embedder)  # migrates, then repairs the index
    try:
        api = TestClient(create_app(service))
        listed = api.post("/v3/memories/", json={"filters": {"AND": [{"user_id": "ana"},
                                                                     {"agent_id": "travel-agent"}]}}).json()
        found = api.post("/v3/memories/search/", json={"query": "bees", "threshold": 0.0, "filters": {
            "AND": [{"user_id": "ana"}, {"agent_id": "travel-agent"}]}}).json()
        for memory in (*listed["results"], *found["results"]):
            assert memory["agent_id"] == "travel-agent" and memory["metadata"] == {"hive": 3}
        assert len(listed["results"]) == len(found["results"]) == 1
    finally:
        service.close()
