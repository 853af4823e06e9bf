"""Fuzzing: schemathesis drives every operation of the daemon's own OpenAPI schema (bounded),
and a hypothesis property checks that no search ever returns another user's data."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import content_type_conformance, response_schema_conformance

from dcpm.api.models import AddMemoryRequest, SearchRequest
from dcpm.config import Settings
from dcpm.domain import Turn
from dcpm.server.app import create_app
from dcpm.service import MemoryService
from dcpm.testing.scripted_llm import LLMServer

FUZZ_EXAMPLES = 20  # per operation: a bounded run that fits CI
ADMIN_TOKEN = "fuzz-admin"  # sent with every case: keys the fuzzer creates must not lock it out


@pytest.fixture(scope="module")
def fuzzed_app(tmp_path_factory, embedder):
    with LLMServer() as llm:
        settings = Settings(data_dir=tmp_path_factory.mktemp("fuzz"), llm_base_url=llm.url, llm_model="scripted",
                            llm_retry_base_seconds=0.01, api_token=ADMIN_TOKEN)
        service = MemoryService(settings, embedder=embedder)
        service.add_memory(AddMemoryRequest(user_id="ana", text="Ana keeps bees on her allotment"))
        yield create_app(service)
        service.close()


def test_no_operation_answers_5xx_or_breaks_its_schema(fuzzed_app):
    """Every operation of the OpenAPI schema, FUZZ_EXAMPLES generated cases each."""
    schema = schemathesis.openapi.from_asgi("/openapi.json", fuzzed_app)
    checks = [not_a_server_error, response_schema_conformance, content_type_conformance]
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10
    for operation in operations:
        @settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(case=operation.as_strategy())
        def fuzz(case):
            case.call_and_validate(checks=checks, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})

        fuzz()


WORDS = st.sampled_from(["tea", "coffee", "dog", "Leeds", "marathon", "bees", "audit", "sister", "Porto", "knee"])
SENTENCES = st.lists(WORDS, min_size=2, max_size=6).map(" ".join)


@pytest.fixture(scope="module")
def isolation_service(tmp_path_factory, embedder):
    service = MemoryService(Settings(data_dir=tmp_path_factory.mktemp("isolation")), embedder=embedder)
    yield service
    service.close()


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(memories=st.lists(st.tuples(st.sampled_from(["u1", "u2", "u3"]), SENTENCES), min_size=1, max_size=8),
       asker=st.sampled_from(["u1", "u2", "u3"]), query=SENTENCES)
def test_no_search_ever_returns_another_users_data(isolation_service, memories, asker, query):
    for user, text in memories:
        isolation_service.import_turns(user, [Turn(text=text, metadata={"owner": user})])
    known = {u.id for u in isolation_service.users()}
    if asker not in known:
        return
    hits = isolation_service.search(SearchRequest(user_id=asker, query=query, limit=50)).hits
    assert all(hit.metadata["owner"] == asker for hit in hits)
