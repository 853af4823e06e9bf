"""An application written for Mem0's platform, pointed at a dcpm daemon: the published `mem0ai`
MemoryClient, unchanged but for its host and key, sees dcpm's revisions as Mem0 history."""

from __future__ import annotations

import os
import tempfile

import anyio
import pytest

os.environ.setdefault("MEM0_TELEMETRY", "False")  # read when mem0 is imported
os.environ.setdefault("MEM0_DIR", os.path.join(tempfile.gettempdir(), "dcpm-tests-mem0"))  # it writes config there

from mcp import Client  # noqa: E402
from mem0 import MemoryClient  # noqa: E402
from mem0.exceptions import MemoryNotFoundError, ValidationError  # noqa: E402

from dcpm.testing.scripted_llm import LLMServer, supersede_first_candidate  # noqa: E402

from .daemon import Daemon, mcp_stdio  # noqa: E402

KEY = "dcpm-e2e-key"
ANA = {"user_id": "ana"}


@pytest.fixture
def daemon(tmp_path):
    with LLMServer() as llm:
        llm.script.reconcile = supersede_first_candidate
        with Daemon(tmp_path / "data", DCPM_API_TOKEN=KEY, DCPM_LLM_BASE_URL=llm.url,
                    DCPM_LLM_MODEL="scripted") as running:
            yield running


def test_a_mem0_application_runs_unchanged_against_the_daemon(daemon):
    mem0 = MemoryClient(api_key=KEY, host=daemon.url)

    first = mem0.add([{"role": "user", "content": "I drink two espressos every morning"}], user_id="ana")
    second = mem0.add("I switched from espresso to black tea", filters=ANA)
    assert [r["event"] for r in first["results"] + second["results"]] == ["ADD", "UPDATE"]
    coffee, tea = first["results"][0]["id"], second["results"][0]["id"]
    assert second["results"][0]["previous_memory_id"] == coffee

    hits = mem0.search("what does Ana drink in the morning", filters=ANA, top_k=5)["results"]
    hit = next(h for h in hits if h["id"] in (coffee, tea))
    assert [link["text"] for link in hit["chain"]] == ["I drink two espressos every morning",
                                                       "I switched from espresso to black tea"]
    assert {h["id"] for h in mem0.search("morning drink", filters=ANA, latest_only=True)["results"]} & {coffee} == set()

    listed = mem0.get_all(filters=ANA)
    assert listed["count"] == 2 == mem0.users()["results"][0]["total_memories"]  # turns extracted are not counted
    assert [(m["id"], m["current"]) for m in listed["results"]] == [(coffee, False), (tea, True)]
    assert mem0.get(coffee)["superseded_by"] == tea

    assert [(h["event"], h["memory_id"], h["new_memory"]) for h in mem0.history(coffee)] == [
        ("ADD", coffee, "I drink two espressos every morning"),
        ("UPDATE", coffee, "I switched from espresso to black tea")]

    updated = mem0.update(tea, text="Ana drinks black tea without sugar")
    assert updated["memory"] == "Ana drinks black tea without sugar" and updated["revision"] == 3
    assert mem0.history(tea)[-1]["old_memory"] == "I switched from espresso to black tea"

    assert mem0.delete(tea)["relinked"] == [coffee]
    assert mem0.get(coffee)["current"] is True  # the belief it replaced holds again
    with pytest.raises(MemoryNotFoundError):
        mem0.get(tea)

    assert mem0.users()["results"][0]["name"] == "ana"
    mem0.delete_all(user_id="ana")
    assert mem0.get_all(filters=ANA)["results"] == [] and mem0.users()["results"] == []


def test_an_mcp_server_beside_the_daemon_goes_through_it(daemon):
    MemoryClient(api_key=KEY, host=daemon.url).add("I keep bees on my allotment", user_id="ana")

    async def search() -> list[str]:
        server = mcp_stdio(daemon.data_dir, "--user", "ana", DCPM_API_TOKEN=KEY)
        async with Client(server) as client:
            found = await client.call_tool("search_memory", {"query": "bees"})
            return [hit["text"] for hit in found.structured_content["hits"]]

    assert "I keep bees on my allotment" in anyio.run(search)  # the store is locked: only the API reaches it


def test_extracted_memories_keep_the_metadata_a_mem0_application_filters_by(daemon):
    mem0 = MemoryClient(api_key=KEY, host=daemon.url)
    added = mem0.add("I had pizza with the team on Friday", user_id="alex", metadata={"food": "pizza"})
    pizza, pizza_turn = added["results"][0]["id"], added["raw_ids"][0]
    sushi = mem0.add("Sushi is my birthday dinner", user_id="alex", metadata={"food": "sushi"},
                     infer=False)["results"][0]["id"]

    def where(metadata: dict) -> dict:
        return {"AND": [{"user_id": "alex"}, {"metadata": metadata}]}

    def ids(answer: dict) -> set[str]:
        return {memory["id"] for memory in answer["results"]}

    assert ids(mem0.get_all(filters=where({"food": "pizza"}))) == {pizza}  # the fact, its turn listed once
    assert ids(mem0.get_all(filters=where({"food": {"ne": "pizza"}}))) == {sushi}
    found = ids(mem0.search("dinner", filters=where({"food": {"eq": "pizza"}}), threshold=0))
    assert found - {pizza_turn} == {pizza}  # the turn is found too, or folded into the fact extracted from it
    assert ids(mem0.search("dinner", filters=where({"food": {"in": ["sushi"]}}), threshold=0)) == {sushi}
    assert mem0.get(pizza)["metadata"] == {"food": "pizza"}

    with pytest.raises(ValidationError) as refused:
        mem0.get("not-a-memory-id")
    assert refused.value.message == "'not-a-memory-id' is not a memory id (a UUID)"
