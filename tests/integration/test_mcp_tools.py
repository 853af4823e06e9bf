"""The MCP tools through the SDK's own client, in process (the stdio subprocess runs end to end
in tests/e2e/test_mcp_stdio.py)."""

from __future__ import annotations

from typing import Any

import anyio
from mcp import Client

from dcpm.api.models import AddMemoryRequest
from dcpm.mcp.server import USER_META_KEY, build_server


async def _calls(server, *calls: tuple[str, dict[str, Any], dict[str, Any] | None]) -> list:
    async with Client(server) as client:
        return [await client.call_tool(name, arguments, meta=meta) for name, arguments, meta in calls]


def call(server, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None):
    return anyio.run(_calls, server, (name, arguments, meta))[0]


async def _tools(server) -> dict[str, str]:
    async with Client(server) as client:
        return {tool.name: tool.description or "" for tool in (await client.list_tools()).tools}


def test_tools_tell_the_model_when_to_call_them_and_hide_delete_by_default(service):
    tools = anyio.run(_tools, build_server(service, user_id="ana"))
    assert sorted(tools) == ["add_memory", "get_memory", "list_memories", "search_memory"]
    assert "before answering anything personal" in tools["search_memory"]
    assert "durable" in tools["add_memory"]
    assert "delete_memory" in anyio.run(_tools, build_server(service, user_id="ana", allow_delete=True))


def test_the_configured_user_owns_what_the_model_saves(service):
    server = build_server(service, user_id="ana")
    added = call(server, "add_memory", {"text": "I keep bees on my allotment"})
    assert not added.is_error and added.structured_content["user_id"] == "ana"
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
    bobs = service.add_memory(AddMemoryRequest(user_id="bob", text="I keep goats", infer=False)).raw_ids[0]
    server = build_server(service, user_id="ana", allow_delete=True)
    for tool in ("get_memory", "delete_memory"):
        result = call(server, tool, {"memory_id": bobs})
        assert result.is_error and f"no memory with id {bobs}" in result.content[0].text
    assert service.get(bobs).text == "I keep goats"


def test_the_model_may_delete_its_users_memory_when_the_operator_allows(service):
    anas = service.add_memory(AddMemoryRequest(user_id="ana", text="I keep bees", infer=False)).raw_ids[0]
    refused = call(build_server(service, user_id="ana"), "delete_memory", {"memory_id": anas})
    assert refused.is_error
    deleted = call(build_server(service, user_id="ana", allow_delete=True), "delete_memory", {"memory_id": anas})
    assert deleted.structured_content["deleted"] == [anas]


def test_a_user_with_nothing_stored_yet_gets_empty_results_not_errors(service):
    server = build_server(service, user_id="newcomer")
    assert call(server, "search_memory", {"query": "anything"}).structured_content["hits"] == []
    assert call(server, "list_memories", {}).structured_content["total"] == 0
