"""Raw ingest, hybrid search, chains and as_of against the real SQLite, qdrant-edge and model."""

from __future__ import annotations

import pytest

from dcpm.api.models import AddMemoryRequest, SearchRequest
from dcpm.errors import Invalid, NotFound

from .scenarios import ANA_TURNS, BOB_TURNS, ana_drinks_chain, at


def load_two_users(service):
    service.import_turns("ana", [t for t in ANA_TURNS])
    service.import_turns("bob", [t for t in BOB_TURNS])


def test_raw_turns_are_searchable_at_once(service):
    load_two_users(service)
    result = service.search(SearchRequest(user_id="ana", query="What is the name of Ana's dog?"))
    assert result.hits[0].text == "I finally adopted a greyhound, her name is Pepper"
    assert result.hits[0].speaker == "Ana"
    assert "Pepper" in result.context


def test_search_never_returns_another_users_memories(service):
    load_two_users(service)
    for query in ("training for a race", "cat knocked the phone into the bath", "Kraków triathlon"):
        hits = service.search(SearchRequest(user_id="ana", query=query, limit=50, threshold=0)).hits
        assert hits and all(h.speaker == "Ana" for h in hits)


def test_lexical_match_on_a_rare_name_is_found(service):
    load_two_users(service)
    # ranking only: a one-word query carries little evidence and scores below the default threshold
    hits = service.search(SearchRequest(user_id="bob", query="Miso", limit=1, threshold=0)).hits
    assert hits[0].text.startswith("My cat Miso")


def test_unknown_user_is_a_clear_error(service):
    with pytest.raises(NotFound, match="unknown user"):
        service.search(SearchRequest(user_id="nobody", query="anything"))


def test_limits_are_enforced_before_anything_is_written(service, settings):
    load_two_users(service)
    with pytest.raises(Invalid, match="characters"):
        service.add_memory(AddMemoryRequest(user_id="ana", text="x" * (settings.max_text_chars + 1)))
    assert service.list_memories("ana", kind="raw").total == len(ANA_TURNS)


def test_add_memory_without_llm_keeps_the_turn_pending_and_searchable(service):
    response = service.add_memory(AddMemoryRequest(user_id="cara", text="I am allergic to penicillin"))
    assert response.status == "pending" and "extraction waits" in response.message
    raw = service.get(response.raw_ids[0])
    assert raw.status == "pending"
    assert service.search(SearchRequest(user_id="cara", query="drug allergy")).hits[0].id == raw.id


def test_as_of_hides_turns_said_later(service):
    load_two_users(service)
    hits = service.search(SearchRequest(user_id="ana", query="half marathon training", as_of=at(2025, 1, 20),
                                        threshold=0)).hits
    assert all("marathon" not in h.text for h in hits)
    assert len(hits) == 2


def test_hit_on_old_revision_carries_the_whole_chain_and_the_current_belief(service):
    coffee, black, green = ana_drinks_chain(service)
    hits = service.search(SearchRequest(user_id="ana", query="espresso every morning", kinds=["identity"])).hits
    top = hits[0]
    assert top.id == coffee.id
    assert [link.text for link in top.chain] == [coffee.text, black.text, green.text]
    assert [link.current for link in top.chain] == [False, False, True]
    assert top.current.id == green.id


def test_as_of_answers_with_the_revision_current_at_that_date(service):
    coffee, black, green = ana_drinks_chain(service)
    hits = service.search(SearchRequest(user_id="ana", query="what does Ana drink", kinds=["identity"],
                                        as_of=at(2025, 4, 1))).hits
    assert [h.id for h in hits] == [black.id]
    assert [link.current for link in hits[0].chain] == [False, True, False]


def test_show_item_returns_chain_in_order(service):
    coffee, black, green = ana_drinks_chain(service)
    item = service.get(black.id)
    assert [link.id for link in item.chain] == [coffee.id, black.id, green.id]
    assert item.supersedes == coffee.id and item.superseded_by == green.id and not item.current
