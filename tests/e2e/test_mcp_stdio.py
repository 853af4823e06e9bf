"""`dcpm mcp` over stdio, driven by the MCP SDK's own client as Claude Desktop would start it."""

from __future__ import annotations

import subprocess
import sys

import anyio
from mcp import Client, StdioServerParameters

from dcpm.testing.scripted_llm import LLMServer, supersede_first_candidate

from .daemon import dcpm_env, mcp_stdio


async def conversation(server: StdioServerParameters) -> dict:
    async with Client(server) as client:
        tools = [tool.name for tool in (await client.list_tools()).tools]
        first = await client.call_tool("add_memory", {"text": "I drink two espressos every morning"})
        second = await client.call_tool("add_memory", {"text": "I switched from espresso to black tea"})
        found = await client.call_tool("search_memory", {"query": "what does Ana drink in the morning"})
        current = next(h for h in found.structured_content["hits"] if h["kind"] != "raw" and h["current"])
        detail = await client.call_tool("get_memory", {"memory_id": current["id"]})
        missing = await client.call_tool("get_memory", {"memory_id": "00000000-0000-4000-8000-000000000000"})
        return {"tools": tools, "ops": [c["op"] for r in (first, second) for c in r.structured_content["changes"]],
                "saved": second.content[0].text, "found": found.content[0].text, "hit": current,
                "detail": detail.structured_content, "missing": missing}


def test_an_mcp_client_saves_searches_and_reads_a_chain_over_stdio(tmp_path):
    with LLMServer() as llm:
        llm.script.reconcile = supersede_first_candidate
        server = mcp_stdio(tmp_path / "data", "--user", "ana", DCPM_LLM_BASE_URL=llm.url, DCPM_LLM_MODEL="scripted")
        seen = anyio.run(conversation, server)
    assert sorted(seen["tools"]) == ["add_memory", "get_memory", "list_memories", "search_memory"]
    assert seen["ops"] == ["RAW", "ADD", "RAW", "SUPERSEDE"]
    tea, coffee = seen["hit"]["id"], seen["hit"]["chain"][0]["id"]
    assert f"- revised (identity) I switched from espresso to black tea [id {tea}], replacing id {coffee}" \
        in seen["saved"].splitlines()
    assert f"I switched from espresso to black tea (earlier: I drink two espressos every morning) [id {tea}]" \
        in seen["found"]
    assert [link["text"] for link in seen["hit"]["chain"]] == ["I drink two espressos every morning",
                                                               "I switched from espresso to black tea"]
    memory, history = seen["detail"]["memory"], seen["detail"]["history"]
    assert memory["id"] == tea and [link["current"] for link in memory["chain"]] == [False, True]
    assert [event["action"] for event in history] == ["created", "created", "superseded"]
    assert seen["missing"].is_error
    assert seen["missing"].content[0].text == "Not found: no memory with id 00000000-0000-4000-8000-000000000000"


def test_nothing_but_mcp_reaches_stdout_while_the_store_loads(tmp_path):
    """A client that closes at once: the server loads the store and models, sees EOF and exits,
    and its stdout, the MCP channel, stayed empty."""
    result = subprocess.run([sys.executable, "-m", "dcpm.cli", "mcp", "--user", "ana"], input="", check=False,
                            env=dcpm_env(tmp_path / "data"), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
