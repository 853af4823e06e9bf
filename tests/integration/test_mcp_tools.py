"""The MCP tools through the SDK's own client, in process (the stdio subprocess runs end to end
in tests/e2e/test_mcp_stdio.py)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import anyio
import pytest
from mcp import Client

from dcpm.api.models import AddMemoryRequest, SearchRequest
from dcpm.mcp.server import USER_META_KEY, build_server
from dcpm.service import MemoryService
from dcpm.testing.scripted_llm import LLMServer, add_everything, supersede_first_candidate


async def _calls(server, *calls: tuple[str, dict[str, Any], dict[str, Any] | None]) -> list:
    async with Client(server) as client:
        return [await client.call_tool(name, arguments, meta=meta) for name, arguments, meta in calls]


def call(server, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None):
    return anyio.run(_calls, server, (name, arguments, meta))[0]


async def _tools(server) -> list:
    async with Client(server) as client:
        return (await client.list_tools()).tools


def descriptions(server) -> dict[str, str]:
    return {tool.name: tool.description or "" for tool in anyio.run(_tools, server)}


def remember(service, *texts: str, user: str = "ana") -> list[str]:
    return [service.add_memory(AddMemoryRequest(user_id=user, text=text, infer=False)).raw_ids[0] for text in texts]


@pytest.fixture
def extracting(settings, embedder):
    """A service whose writer extracts through the scripted LLM server (real HTTP)."""
    with LLMServer() as llm:
        settings.llm_base_url, settings.llm_model = llm.url, "scripted"
        service = MemoryService(settings, embedder=embedder)
        yield service, llm
        service.close()


def test_tools_tell_the_model_when_to_call_them_and_hide_delete_by_default(service):
    tools = descriptions(build_server(service, user_id="ana"))
    assert sorted(tools) == ["add_memory", "get_memory", "list_memories", "search_memory"]
    assert "before answering anything personal" in tools["search_memory"]
    assert "durable" in tools["add_memory"]
    assert "delete_memory" in descriptions(build_server(service, user_id="ana", allow_delete=True))


def test_tool_descriptions_read_as_plain_sentences_without_docstring_layout(service):
    for tool in anyio.run(_tools, build_server(service, user_id="ana", allow_delete=True)):
        texts = [tool.description or ""] + [spec.get("description", "") for spec in
                                            tool.input_schema.get("properties", {}).values()]
        for text in texts:
            assert text == text.strip(), (tool.name, text)
            assert "\n" not in text and "  " not in text, (tool.name, text)
        assert tool.description and tool.description.endswith("."), tool.name
        assert tool.output_schema is not None, tool.name  # hosts that read structured content get a schema


def test_search_answers_with_short_lines_carrying_ids_and_the_hits_as_structured_content(service):
    remember(service, "I keep bees on my allotment", "My sister Lena lives in Porto", "I am allergic to walnuts",
             "I work night shifts as a nurse", "My cat Miso is afraid of the vacuum cleaner")
    found = call(build_server(service, user_id="ana"), "search_memory", {"query": "bees", "threshold": 0})
    text, hits = found.content[0].text, found.structured_content["hits"]
    assert not found.is_error and hits[0]["text"] == "I keep bees on my allotment" and len(hits) == 5
    assert f"I keep bees on my allotment [id {hits[0]['id']}]" in text.splitlines()[1]
    assert all(f"[id {hit['id']}]" in text for hit in hits)
    assert "score" not in text and "score" not in hits[0] and "took_ms" not in found.structured_content
    # what the tool answered before: the API's search response as pretty-printed JSON
    before = service.search(SearchRequest(user_id="ana", query="bees", threshold=0)).model_dump_json(indent=2)
    assert len(text) * 4 < len(before)


def test_a_revised_fact_reads_with_its_earlier_belief_and_a_replaced_one_with_what_holds_now(extracting):
    service, llm = extracting
    day = datetime(2025, 5, 1, 8, tzinfo=timezone.utc)
    for n, text in enumerate(["I drink two espressos every morning", "I switched from espresso to black tea"]):
        llm.script.reconcile = supersede_first_candidate if n else add_everything
        service.add_memory(AddMemoryRequest(user_id="ana", text=text, timestamp=day + timedelta(days=7 * n)))
    found = call(build_server(service, user_id="ana"), "search_memory", {"query": "morning drink", "threshold": 0})
    lines = found.content[0].text.splitlines()
    tea = next(hit for hit in found.structured_content["hits"] if hit["kind"] != "raw" and hit["current"])
    assert (f"- [2025-05-08] (identity) I switched from espresso to black tea "
            f"(earlier: I drink two espressos every morning) [id {tea['id']}]") in lines
    coffee = tea["chain"][0]
    assert (f"- [2025-05-01] (identity, replaced) I drink two espressos every morning "
            f"(now: I switched from espresso to black tea) [id {coffee['id']}]") in lines
    detail = call(build_server(service, user_id="ana"), "get_memory", {"memory_id": coffee["id"]})
    assert detail.content[0].text.splitlines()[:4] == [
        f"[2025-05-01] (identity, replaced) I drink two espressos every morning [id {coffee['id']}]",
        "Revisions, oldest first:",
        f"- [2025-05-01] I drink two espressos every morning [id {coffee['id']}]",
        f"- [2025-05-08] I switched from espresso to black tea [id {tea['id']}] (current)"]
    assert [e["action"] for e in detail.structured_content["history"]] == ["created", "created", "superseded"]


def test_a_wrong_argument_comes_back_as_a_tool_error_saying_what_was_wrong(service):
    remember(service, "I keep bees on my allotment")
    missing = str(uuid.uuid4())
    server = build_server(service, user_id="ana")
    expected = {("search_memory", "   "): "Invalid request: query is empty",
                ("search_memory", 500): "Invalid request: limit: Input should be less than or equal to 50",
                ("get_memory", missing): f"Not found: no memory with id {missing}",
                ("get_memory", "bees"): "Invalid request: 'bees' is not a memory id",
                ("add_memory", " "): "Invalid request: text is empty",
                ("list_memories", -1): "Invalid request: offset: Input should be greater than or equal to 0"}
    arguments = {("search_memory", "   "): {"query": "   "}, ("search_memory", 500): {"query": "bees", "limit": 500},
                 ("get_memory", missing): {"memory_id": missing}, ("get_memory", "bees"): {"memory_id": "bees"},
                 ("add_memory", " "): {"text": " "}, ("list_memories", -1): {"offset": -1}}
    results = anyio.run(_calls, server, *((tool, arguments[(tool, key)], None) for tool, key in expected))
    for (case, message), result in zip(expected.items(), results):
        assert result.is_error, case
        assert result.content[0].text.startswith(message), (case, result.content[0].text)
        assert "Error executing tool" not in result.content[0].text
    bad_user = call(build_server(service), "search_memory", {"query": "bees"}, meta={USER_META_KEY: "ana smith!"})
    assert bad_user.is_error and bad_user.content[0].text.startswith("Invalid request: user_id must be")


def test_the_configured_user_owns_what_the_model_saves(service):
    server = build_server(service, user_id="ana")
    added = call(server, "add_memory", {"text": "I keep bees on my allotment"})
    assert not added.is_error and added.content[0].text.startswith("Saved")
    assert [c["op"] for c in added.structured_content["changes"]] == ["RAW"]
    assert service.list_memories("ana", kind="raw").items[0].metadata == {"source": "mcp"}
    found = call(server, "search_memory", {"query": "bees"}).structured_content
    assert found["hits"][0]["text"] == "I keep bees on my allotment" and "nodes" in found


def test_without_a_configured_user_the_clients_metadata_names_one(service):
    server = build_server(service)
    refused = call(server, "add_memory", {"text": "I keep bees"})
    assert refused.is_error and "--user" in refused.content[0].text
    call(server, "add_memory", {"text": "I keep goats"}, meta={USER_META_KEY: "bob"})
    assert service.list_memories("bob", kind="raw").total == 1


def test_another_users_memory_reads_as_missing_and_cannot_be_deleted(service):
    bobs = remember(service, "I keep goats", user="bob")[0]
    server = build_server(service, user_id="ana", allow_delete=True)
    for tool in ("get_memory", "delete_memory"):
        result = call(server, tool, {"memory_id": bobs})
        assert result.is_error and result.content[0].text == f"Not found: no memory with id {bobs}"
    assert service.get(bobs).text == "I keep goats"


def test_the_model_may_delete_its_users_memory_when_the_operator_allows(service):
    anas = remember(service, "I keep bees")[0]
    refused = call(build_server(service, user_id="ana"), "delete_memory", {"memory_id": anas})
    assert refused.is_error
    deleted = call(build_server(service, user_id="ana", allow_delete=True), "delete_memory", {"memory_id": anas})
    assert deleted.structured_content["deleted"] == [anas]
    assert deleted.content[0].text == f"Deleted 1 memory: {anas}."


def test_listing_pages_through_memories_oldest_first(service):
    ids = remember(service, "I keep bees", "I keep goats", "I keep hens")
    listed = call(build_server(service, user_id="ana"), "list_memories", {"kind": "raw", "limit": 2, "offset": 1})
    assert listed.content[0].text.splitlines()[0] == "Memories 2-3 of 3, oldest first:"
    assert [item["id"] for item in listed.structured_content["items"]] == ids[1:]


def test_a_user_with_nothing_stored_yet_gets_empty_results_not_errors(service):
    server = build_server(service, user_id="newcomer")
    found = call(server, "search_memory", {"query": "anything"})
    assert found.structured_content["hits"] == [] and found.content[0].text.startswith("No memories")
    listed = call(server, "list_memories", {})
    assert listed.structured_content["total"] == 0 and listed.content[0].text.startswith("No memories")
