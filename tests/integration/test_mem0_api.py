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
    with pytest.raises(ValueError, match="401"):
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
    ({"agent_id": "travel-agent", "user_id": "ana"}, "agent_id is not supported"),
    ({"OR": [{"user_id": "ana"}, {"user_id": "bob"}]}, "OR filters"),
    ({"run_id": "s1"}, "exactly one user_id"),
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
