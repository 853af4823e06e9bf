"""Scores that mean something: relevance comparable across queries, a threshold that keeps
unrelated memories out of hits and context, and one hit per memory (a turn and its extracted item)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

os.environ.setdefault("MEM0_TELEMETRY", "False")
os.environ.setdefault("MEM0_DIR", os.path.join(tempfile.gettempdir(), "dcpm-tests-mem0"))

from mem0 import MemoryClient

from dcpm.api.models import AddMemoryRequest, SearchRequest
from dcpm.config import Settings
from dcpm.mcp.server import build_server
from dcpm.server.app import create_app
from dcpm.service import MemoryService
from dcpm.testing.scripted_llm import LLMServer

from .life_of_ines import PARAPHRASES, UNRELATED, stored_ines
from .scenarios import ana_drinks_chain
from .served import served
from .test_mcp_tools import call

KEY = "dcpm-test-key"


@pytest.fixture(scope="module")
def ines(tmp_path_factory, embedder) -> Iterator[MemoryService]:
    """Inês and her 209 memories, in their own words, stored verbatim; shared by the module's
    read-only tests (a fresh store costs a few seconds of embedding)."""
    settings = Settings(data_dir=tmp_path_factory.mktemp("ines") / "data", api_token=SecretStr(KEY))
    service = stored_ines(settings, embedder)
    yield service
    service.close()


@pytest.mark.parametrize("associative", [True, False], ids=["adapter", "frozen"])
def test_an_unrelated_question_finds_nothing_above_the_default_threshold(ines, associative):
    for question in UNRELATED:
        result = ines.search(SearchRequest(user_id="ines", query=question, associative=associative))
        above = [(h.text, h.score) for h in result.hits if h.score >= result.threshold]
        assert above == [] and result.context == "", question
        assert result.threshold == ines.settings.search_threshold
        assert len(result.hits) == 10  # still listed (no threshold sent), only kept out of the context block
        strict = ines.search(SearchRequest(user_id="ines", query=question, associative=associative,
                                           threshold=ines.settings.search_threshold))
        assert strict.hits == [] and strict.context == ""


@pytest.mark.parametrize("associative", [True, False], ids=["adapter", "frozen"])
def test_a_paraphrased_question_finds_its_memory_first_above_the_default_threshold(ines, associative):
    for question, memory in PARAPHRASES:
        result = ines.search(SearchRequest(user_id="ines", query=question, associative=associative))
        assert result.hits and result.hits[0].text == memory, (question, [(h.text, h.score) for h in result.hits])
        assert result.hits[0].score >= ines.settings.search_threshold
        assert result.context.splitlines()[1].endswith(f"Inês: {memory}")


def test_scores_add_up_from_their_parts_and_do_not_depend_on_the_other_hits(ines):
    cat = "I have a cat called Biscoito, a ginger tom I adopted from the clinic four years ago."
    alone = ines.search(SearchRequest(user_id="ines", query="Biscoito the ginger cat", limit=1))
    more = ines.search(SearchRequest(user_id="ines", query="Biscoito the ginger cat", limit=20, threshold=0))
    assert alone.hits[0].text == cat and alone.hits[0].score == more.hits[0].score
    for hit in more.hits:
        parts = more.dense_weight * hit.dense_relevance + (1 - more.dense_weight) * hit.lexical_relevance
        assert hit.score == pytest.approx(parts, abs=1e-5)
    assert more.hits[0].sparse_score > 0 and more.hits[-1].score < more.hits[0].score


def test_threshold_and_min_score_over_http(ines):
    question = "What's the name of her ginger cat?"
    with TestClient(create_app(ines), headers={"Authorization": f"Bearer {KEY}"}) as client:
        every = client.post("/v1/search", json={"user_id": "ines", "query": question, "threshold": 0}).json()
        strict = client.post("/v1/search", json={"user_id": "ines", "query": question, "min_score": 0.99}).json()
        default = client.post("/v1/search", json={"user_id": "ines", "query": question}).json()
        refused = client.post("/v1/search", json={"user_id": "ines", "query": question, "threshold": 1.5})
    assert len(every["hits"]) == 10 and every["threshold"] == 0
    assert strict["hits"] == [] and strict["context"] == "" and strict["threshold"] == 0.99
    assert len(default["hits"]) == 10 and 1 <= sum(h["score"] >= default["threshold"] for h in default["hits"]) < 10
    assert len(default["context"].splitlines()) < len(every["context"].splitlines())
    assert refused.status_code == 422


def test_the_python_client_and_the_mem0_client_send_a_threshold(ines):
    from dcpm.api.client import Client

    question = "Where does Inês's sister live these days?"
    with served(create_app(ines)) as url:
        with Client(url, token=KEY) as client:
            assert client.search(user_id="ines", query=question, threshold=0.99).hits == []
            assert client.search(user_id="ines", query=question, min_score=0).hits[0].text.startswith("My sister Marta")
        mem0 = MemoryClient(api_key=KEY, host=url)
        loose = mem0.search(question, filters={"user_id": "ines"}, threshold=0.0)["results"]
        strict = mem0.search(question, filters={"user_id": "ines"}, threshold=0.99)
        unrelated = mem0.search("What is the plural of 'cactus'?", filters={"user_id": "ines"})
    assert len(loose) == 10 and loose[0]["memory"].startswith("My sister Marta")
    assert strict["results"] == [] and strict["context"] == ""
    assert unrelated["context"] == ""  # no threshold sent: hits listed, none good enough for the context
    assert all(r["score"] < ines.settings.search_threshold for r in unrelated["results"])


def test_the_mcp_search_tool_takes_a_threshold(ines):
    server = build_server(ines, user_id="ines")
    loose = call(server, "search_memory", {"query": "What does coriander taste like to Inês?", "threshold": 0})
    default = call(server, "search_memory", {"query": "What does coriander taste like to Inês?"})
    strict = call(server, "search_memory", {"query": "Who was the first person to reach the South Pole?",
                                             "threshold": ines.settings.search_threshold})
    assert len(loose.structured_content["hits"]) == 10
    assert default.structured_content["hits"][0]["text"] == "I can't stand coriander, it tastes like soap to me."
    assert strict.structured_content["hits"] == []


@pytest.fixture
def extracting(settings, embedder) -> Iterator[MemoryService]:
    """A writer that extracts through the scripted LLM server: each turn becomes one identity item
    with the turn's own words."""
    with LLMServer() as llm:
        settings.llm_base_url, settings.llm_model = llm.url, "scripted"
        service = MemoryService(settings, embedder=embedder)
        yield service
        service.close()


def test_a_turn_and_the_item_extracted_from_it_are_one_hit_with_the_turn_as_provenance(extracting):
    said = extracting.add_memory(AddMemoryRequest(user_id="ana", messages=[
        {"content": "I drink two espressos every morning", "name": "Ana"}]))
    for text in ("My sister lives in Lyon with her twins", "I play the ukulele badly",
                 "I run along the seafront on Sundays"):
        extracting.add_memory(AddMemoryRequest(user_id="ana", messages=[{"content": text, "name": "Ana"}]))
    item_id = next(op.id for op in said.operations if op.op == "ADD")
    result = extracting.search(SearchRequest(user_id="ana", query="How much coffee does Ana drink in the morning?",
                                             limit=2, threshold=0))
    espresso = [h for h in result.hits if "espresso" in h.text]
    assert [h.id for h in espresso] == [item_id] and result.hits[0].id == item_id
    assert espresso[0].source.id == said.raw_ids[0] and espresso[0].source.speaker == "Ana"
    assert espresso[0].source.text == "I drink two espressos every morning"
    assert len(result.hits) == 2 and "espresso" not in result.hits[1].text  # limit counts different memories
    assert result.context.count("espressos") == 1


def test_the_context_line_of_an_old_revision_says_it_was_replaced_and_by_what(service):
    ana_drinks_chain(service)
    result = service.search(SearchRequest(user_id="ana", query="espresso every morning", kinds=["identity"]))
    lines = result.context.splitlines()
    assert lines[1] == ("- [2025-01-10] (identity) Ana drinks two espressos every morning (replaced 2025-03-01) "
                        "-> now: Ana now only drinks green tea, no caffeine after noon")
    # The old revision never lists a past of its own; the head, when it is relevant too (same
    # habit, no shared word), is the line that carries the chain as its past
    heads = [line for line in lines[2:] if line.startswith("- [2025-06-01]")]
    assert all(line.endswith("(earlier: Ana drinks two espressos every morning; Ana has switched from coffee "
                             "to black tea)") for line in heads)
    assert sum("(earlier: Ana drinks two espressos" in line for line in lines) == len(heads)
