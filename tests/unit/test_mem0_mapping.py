"""Mem0 platform shapes mapped onto dcpm's (pure functions of dcpm.server.mem0.mapping)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from dcpm.api.models import AddMemoryResponse, HistoryEvent, HistoryResponse, Operation, metadata_conditions
from dcpm.errors import Invalid
from dcpm.index.base import Equals, NotEquals, OneOf
from dcpm.server.mem0.filters import entities_of_owner
from dcpm.server.mem0.mapping import Scope, add_response, history_entries, query_filters, scope_of

T0 = datetime(2025, 1, 10, tzinfo=timezone.utc)


@pytest.mark.parametrize("filters, top_level, scope", [
    ({"user_id": "ana"}, {}, Scope("ana")),
    ({"AND": [{"user_id": "ana"}, {"run_id": "s1"}]}, {}, Scope("ana", "s1")),
    (None, {"user_id": "ana", "run_id": None}, Scope("ana")),
    ({"AND": [{"user_id": "ana"}, {"agent_id": "*"}]}, {}, Scope("ana")),
    ({"user_id": "ana"}, {"user_id": "ana"}, Scope("ana")),
])
def test_filters_name_one_user_and_an_optional_run(filters, top_level, scope):
    assert scope_of(filters, **top_level) == scope


def test_an_agent_alone_owns_its_memories_apart_from_every_user():
    assert scope_of({"agent_id": "travel-agent"}).user_id == "agent:travel-agent"
    assert scope_of(None, app_id="planner").user_id == "app:planner"
    assert entities_of_owner("agent:travel-agent") == ("agent_id", "travel-agent")
    assert entities_of_owner("ana") == ("user_id", "ana")


def test_an_agent_beside_a_user_is_a_namespace_selected_through_metadata():
    scope = scope_of({"AND": [{"user_id": "ana"}, {"agent_id": "travel-agent"}]})
    assert (scope.user_id, scope.namespace) == ("ana", {"agent_id": "travel-agent"})
    assert metadata_conditions(scope.metadata) == (Equals("metadata.dcpm_agent_id", "travel-agent"),)


def test_metadata_filters_of_an_and_list_become_index_conditions():
    scope = scope_of({"AND": [{"user_id": "alex"}, {"metadata": {"food": "pizza"}},
                              {"metadata": {"food": {"ne": "sushi"}, "drink": {"in": ["tea", "coffee"]}}},
                              {"metadata": {"year": {"nin": [2023, 2024]}}}]})
    assert set(metadata_conditions(scope.metadata)) == {
        Equals("metadata.food", "pizza"), NotEquals("metadata.food", "sushi"),
        OneOf("metadata.drink", ("tea", "coffee")), NotEquals("metadata.year", 2023),
        NotEquals("metadata.year", 2024)}


@pytest.mark.parametrize("filters, fragment", [
    ({}, "name one user_id"),
    ({"OR": [{"user_id": "ana"}, {"user_id": "bob"}]}, "OR filters"),
    ({"AND": [{"user_id": "ana"}, {"user_id": "bob"}]}, "name one user_id"),
    ({"user_id": {"in": ["ana", "bob"]}}, "plain string"),
    ({"user_id": "ana", "created_at": {"gte": "2025-01-01"}}, "unsupported filter 'created_at'"),
    ({"user_id": "ana", "metadata": {"food": {"contains": "pi"}}}, "contains: Extra inputs"),
    ({"user_id": "ana", "metadata": {"food.kind": "x"}}, "should match pattern"),
    ({"AND": [{"user_id": "ana"}, {"metadata": {"food": "a"}}, {"metadata": {"food": "b"}}]}, "twice with 'eq'"),
    ({"agent_id": "bad agent"}, "agent_id must be"),
])
def test_filters_dcpm_cannot_honour_are_refused_not_widened(filters, fragment):
    with pytest.raises(Invalid, match=fragment):
        scope_of(filters)


def test_filters_in_a_query_parameter_are_read_as_json_or_python_literal():
    assert query_filters('{"user_id": "ana"}') == {"user_id": "ana"}
    assert query_filters("{'user_id': 'ana'}") == {"user_id": "ana"}  # what httpx makes of a dict
    with pytest.raises(Invalid):
        query_filters("__import__('os')")


def test_a_supersede_is_reported_as_an_update_naming_the_replaced_memory():
    result = AddMemoryResponse(request_id="r2", user_id="ana", raw_ids=["raw2"], status="done", operations=[
        Operation(op="RAW", id="raw2", text="I switched to black tea", kind="raw"),
        Operation(op="SUPERSEDE", id="black", text="Ana switched to black tea", kind="identity", target="coffee"),
        Operation(op="NONE", id="bees", text="Ana keeps bees", kind="fact", target="bees")])
    answer = add_response(result, infer=True)
    assert answer.status == "SUCCEEDED" and answer.event_id == "r2"
    assert [(r.id, r.event, r.previous_memory_id) for r in answer.results] == [("black", "UPDATE", "coffee"),
                                                                               ("bees", "NONE", None)]


def test_without_inference_the_stored_turns_are_the_memories():
    result = AddMemoryResponse(request_id="r1", user_id="ana", raw_ids=["raw1"], status="stored",
                               operations=[Operation(op="RAW", id="raw1", text="I keep bees", kind="raw")])
    answer = add_response(result, infer=False)
    assert [(r.id, r.event, r.memory) for r in answer.results] == [("raw1", "ADD", "I keep bees")]


def test_history_shows_a_superseded_memory_with_its_successor():
    events = [
        HistoryEvent(at=T0, action="created", item_id="coffee", request_id="r1", detail={"text": "Ana drinks coffee"}),
        HistoryEvent(at=T0 + timedelta(days=50), action="created", item_id="black", request_id="r2",
                     detail={"text": "Ana drinks black tea", "supersedes": "coffee"}),
        HistoryEvent(at=T0 + timedelta(days=50), action="superseded", item_id="coffee", request_id="r2",
                     detail={"by": "black"}),
        HistoryEvent(at=T0 + timedelta(days=60), action="updated", item_id="black", request_id="r3",
                     detail={"before": "Ana drinks black tea", "after": "Ana drinks black tea, no sugar"}),
    ]
    entries = history_entries(HistoryResponse(item_id="black", chain_id="coffee", events=events), "ana")
    assert [(e.event, e.memory_id, e.old_memory, e.new_memory, e.successor_id) for e in entries] == [
        ("ADD", "coffee", None, "Ana drinks coffee", None),
        ("UPDATE", "coffee", "Ana drinks coffee", "Ana drinks black tea", "black"),
        ("UPDATE", "black", "Ana drinks black tea", "Ana drinks black tea, no sugar", None),
    ]
    assert len({e.id for e in entries}) == 3 and all(e.user_id == "ana" for e in entries)


@pytest.mark.parametrize("entity, longest", [("user_id", 128), ("agent_id", 122), ("app_id", 124)])
def test_an_owner_id_too_long_is_refused_naming_the_limit_that_applies(entity, longest):
    """The refusal said '1-120 characters' for every entity: a user id of 121-128 characters is
    taken, and an agent's own id holds 'agent:' within the 128 of an owner id."""
    assert scope_of({entity: "a" * longest}).user_id.endswith("a" * longest)
    with pytest.raises(Invalid, match=f"{entity} must be 1-{longest} characters"):
        scope_of({entity: "a" * (longest + 1)})
