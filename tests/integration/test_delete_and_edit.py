"""Hard delete and text edits by id: chains stay consistent, nothing of the text survives."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from dcpm.api.client import Client
from dcpm.api.models import AddMemoryRequest, SearchRequest
from dcpm.consolidation.graph import add_evidence, create_node
from dcpm.errors import Conflict, Invalid, NotFound
from dcpm.index import Scope, projection
from dcpm.index.base import DENSE
from dcpm.server.app import create_app
from dcpm.store.items import update_text
from dcpm.store.models import Event, Item, ItemRevision, Node, RawInput, User

from .scenarios import ana_drinks_chain
from .served import served

pytestmark = pytest.mark.storage  # these run on SQLite and on PostgreSQL (tests/conftest.py)


def chain_of(service, item_id):
    return [(link.text.split(" ")[-1], link.current) for link in service.get(item_id).chain]


def events_of(service, subject_id):
    with service.db.session() as session:
        return list(session.scalars(select(Event).where(Event.subject_id == subject_id)))


def current_ids(service, user_id="ana"):
    """What System 1 would offer as reconciliation candidates: the heads, by their vector payload."""
    vector = service.embedder.encode_documents(["what does Ana drink"]).dense[0]
    return {hit.id for hit in service.index.query(DENSE, vector, Scope(user_id=user_id, current_only=True), 20)}


def test_deleting_a_middle_revision_links_its_neighbours_and_leaves_a_tombstone(service):
    coffee, black, green = ana_drinks_chain(service)
    result = service.delete_memory(black.id)
    assert result.deleted == [black.id] and sorted(result.relinked) == sorted([coffee.id, green.id])
    item = service.get(green.id)
    assert item.supersedes == coffee.id and service.get(coffee.id).superseded_by == green.id
    assert [link.id for link in item.chain] == [coffee.id, green.id]
    assert service.get(coffee.id).valid_to == green.valid_from
    assert not service.index.existing([black.id])
    with pytest.raises(NotFound):
        service.get(black.id)
    events = events_of(service, black.id)
    assert events and all(e.detail == {"deleted": True} for e in events)
    assert "deleted" in [e.action for e in events]


def test_deleting_the_current_belief_makes_the_previous_one_current_again(service):
    coffee, black, green = ana_drinks_chain(service)
    service.delete_memory(green.id)
    assert chain_of(service, coffee.id) == [("morning", False), ("tea", True)]
    assert service.get(black.id).valid_to is None
    assert black.id in current_ids(service)  # the vector payload follows the row


def test_deleting_with_predecessors_removes_the_older_revisions_too(service):
    coffee, black, green = ana_drinks_chain(service)
    result = service.delete_memory(black.id, with_predecessors=True)
    assert sorted(result.deleted) == sorted([coffee.id, black.id])
    assert service.get(green.id).supersedes is None and chain_of(service, green.id) == [("noon", True)]
    assert not service.index.existing([coffee.id, black.id])


def test_deleting_a_turn_keeps_the_facts_drawn_from_it(service):
    added = service.add_memory(AddMemoryRequest(user_id="ana", text="I keep bees on my allotment", infer=False))
    raw_id = added.raw_ids[0]
    with service.db.session() as session:
        fact = session.get(Item, ana_drinks_chain(service)[-1].id)
        fact.source_raw_id = raw_id
        update_text(session, fact, "Ana now only drinks green tea, with honey", raw_id=raw_id)
    service.delete_memory(raw_id)
    with service.db.session() as session:
        assert session.get(RawInput, raw_id) is None and session.get(Item, fact.id).source_raw_id is None
        assert [r.raw_id for r in session.scalars(select(ItemRevision))] == [None]
        # the turn's id may be derived from its text (dcpm import): no event keeps it
        assert [e.action for e in session.scalars(select(Event)) if raw_id in (e.subject_id, e.detail.get("raw_id"))
                ] == []
    assert [e.action for e in service.events("ana")].count("deleted") == 1
    assert not service.index.existing([raw_id])


def test_a_node_loses_deleted_evidence_and_goes_when_none_is_left(service):
    coffee, black, green = ana_drinks_chain(service)
    with service.db.session() as session:
        drinks = create_node(session, "ana", "schema", "Ana keeps changing what she drinks", "food", None)
        add_evidence(session, drinks, [black.id, green.id], None)
        morning = create_node(session, "ana", "intention", "Ana wants less caffeine", "health", None)
        add_evidence(session, morning, [green.id], None)
    projection.index_rows(service.db, service.index, service.embedder, nodes=[drinks, morning])
    result = service.delete_memory(green.id)
    assert result.nodes_deleted == [morning.id]
    with service.db.session() as session:
        assert session.get(Node, drinks.id).status == "needs_reinduction" and session.get(Node, morning.id) is None
    assert not service.index.existing([morning.id]) and service.index.existing([drinks.id])
    assert all(e.detail == {"deleted": True} for e in events_of(service, morning.id))


def test_deleting_a_user_removes_everything_of_theirs_and_nothing_else(service):
    ana_drinks_chain(service)
    ana_drinks_chain(service, user_id="bob")
    service.add_memory(AddMemoryRequest(user_id="ana", text="I keep bees on my allotment", infer=False))
    result = service.delete_user("ana")
    assert (result.items, result.raw_inputs) == (3, 1) and result.events_redacted > 0
    assert service.index.count("ana") == 0 and service.index.count("bob") == 3
    with service.db.session() as session:
        assert session.get(User, "ana") is None
        assert not list(session.scalars(select(Item).where(Item.user_id == "ana")))
        assert {e.user_id for e in session.scalars(select(Event).where(Event.detail != {"deleted": True}))} == {"bob"}
    with pytest.raises(NotFound):
        service.search(SearchRequest(user_id="ana", query="tea"))
    assert service.search(SearchRequest(user_id="bob", query="tea", threshold=0)).hits
    with pytest.raises(NotFound):
        service.delete_user("ana")


def test_an_edit_is_an_update_revision_and_is_found_by_its_new_words(service):
    coffee, black, green = ana_drinks_chain(service)
    item = service.update_memory(green.id, "Ana now only drinks rooibos")
    assert item.text == "Ana now only drinks rooibos" and item.revision == green.revision + 1
    assert [r.text for r in item.revisions] == ["Ana now only drinks green tea, no caffeine after noon"]
    hits = service.search(SearchRequest(user_id="ana", query="rooibos", kinds=["identity"])).hits
    assert hits[0].id == green.id and hits[0].text == "Ana now only drinks rooibos"
    with service.db.session() as session:
        assert len(list(session.scalars(select(ItemRevision).where(ItemRevision.item_id == green.id)))) == 1


def test_history_and_raw_turns_are_not_edited(service):
    coffee, black, green = ana_drinks_chain(service)
    with pytest.raises(Conflict):
        service.update_memory(coffee.id, "Ana drinks tea")
    raw_id = service.add_memory(AddMemoryRequest(user_id="ana", text="I keep bees", infer=False)).raw_ids[0]
    with pytest.raises(Invalid):
        service.update_memory(raw_id, "I keep wasps")
    with pytest.raises(Invalid):
        service.update_memory(green.id, "   ")


@pytest.mark.parametrize("text, fragment", [("   ", "the new text is empty"),
                                            ("Ana drinks\x00mate", "the new text contains a NUL character"),
                                            ("tea " * 10_000, "the new text is 40000 characters; the limit is")])
def test_a_refused_edit_says_what_is_wrong_with_the_new_text(service, text, fragment):
    """An edit sends one text, not messages; its refusals used to speak of 'message 1'."""
    coffee, black, green = ana_drinks_chain(service)
    with pytest.raises(Invalid) as refused:
        service.update_memory(green.id, text)
    assert fragment in refused.value.message and "message" not in refused.value.message
    assert service.get(green.id).text == green.text


def test_the_python_client_edits_and_deletes_through_the_daemon(service):
    coffee, black, green = ana_drinks_chain(service)
    with served(create_app(service)) as url, Client(url) as client:
        edited = client.update_memory(green.id, "Ana now only drinks rooibos")
        assert edited.text == "Ana now only drinks rooibos" and edited.revisions[0].op == "UPDATE"
        deleted = client.delete_memory(black.id, with_predecessors=True)
        assert sorted(deleted.deleted) == sorted([coffee.id, black.id])
        with pytest.raises(NotFound):
            client.delete_memory(black.id)
        assert client.delete_user("ana").items == 1
