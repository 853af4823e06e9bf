"""Finding 5: ids sent with imported turns are the client's, never primary keys of the store.
Mallory holds a key for mallory only and knows (or guesses) bob's ids."""

from __future__ import annotations

import json

import pytest

from dcpm.api.models import SearchRequest
from dcpm.domain import Turn
from dcpm.errors import Conflict, Invalid
from dcpm.store.models import RawInput
from dcpm.write.importer import read_file

from .scenarios import ana_drinks_chain

pytestmark = pytest.mark.storage  # these run on SQLite and on PostgreSQL (tests/conftest.py)


def bobs_history(tmp_path, settings):
    """A group chat bob and mallory both have: `dcpm import` derives bob's ids from its lines."""
    path = tmp_path / "group.jsonl"
    path.write_text("\n".join(json.dumps({"user_id": "bob", "text": text, "speaker": "Bob",
                                          "timestamp": "2025-02-01T10:00:00Z"})
                              for text in ("Bob's locker is number 41", "Bob flies to Oslo on Friday")) + "\n")
    return [line.turn for line in read_file(path, None, settings)]


def test_an_import_with_the_upper_case_spelling_of_bobs_id_leaves_bobs_memory_alone(service):
    coffee, black, green = ana_drinks_chain(service, user_id="bob")
    imported = service.import_turns("mallory", [Turn(text="mallory was here", id=green.id.upper()),
                                                Turn(text="and here", id="{" + black.id + "}")])
    assert imported == 2
    hits = service.search(SearchRequest(user_id="bob", query="green tea no caffeine", kinds=["identity"])).hits
    assert green.id in [h.id for h in hits]
    assert service.get(green.id).text == green.text and service.owner_of(green.id) == "bob"
    assert service.index.count("bob") == 3 and service.index.count("mallory") == 2
    mallorys = service.list_memories("mallory", kind="raw").items
    assert {m.id for m in mallorys}.isdisjoint({coffee.id, black.id, green.id})


def test_mallorys_pre_emptive_import_does_not_stop_bobs_import(service, settings, tmp_path):
    turns = bobs_history(tmp_path, settings)
    stolen = [Turn(text="decoy", id=t.id) for t in turns]
    assert service.import_turns("mallory", stolen) == len(turns)
    assert service.import_turns("bob", bobs_history(tmp_path, settings)) == len(turns)
    assert service.import_turns("bob", bobs_history(tmp_path, settings)) == 0  # a re-run skips what is stored
    assert service.import_turns("mallory", [Turn(text="probe", id=t.id) for t in turns]) == 0  # her own, not bob's
    assert sorted(r.text for r in service.list_memories("bob", kind="raw").items) == sorted(t.text for t in turns)


def test_the_same_id_twice_in_one_batch_is_invalid(service):
    turn_id = "6a1f5d1e-0b8f-4f7e-9a0c-3f5e1d2c4b6a"
    with pytest.raises(Invalid, match="twice"):
        service.import_turns("ana", [Turn(text="one", id=turn_id), Turn(text="two", id=turn_id.upper())])
    with pytest.raises(Invalid, match="twice"):
        service.import_turns("ana", [Turn(text="one", id=turn_id), Turn(text="one", id=turn_id)])
    assert service.users() == []


def test_an_id_stored_as_both_a_turn_and_an_item_is_refused_everywhere(service):
    coffee, black, green = ana_drinks_chain(service, user_id="bob")
    service.import_turns("mallory", [Turn(text="hello")])
    with service.db.session() as session:  # what an import could write before ids were scoped
        raw = RawInput(id=green.id, user_id="mallory", request_id=green.id, text="shadow", timestamp=green.valid_from)
        session.add(raw)
    for call in (lambda: service.owner_of(green.id), lambda: service.get(green.id),
                 lambda: service.delete_memory(green.id), lambda: service.update_memory(green.id, "x")):
        with pytest.raises(Conflict, match="both"):
            call()
    assert service.index.existing([green.id])


def test_the_importer_stores_a_repeated_line_once(tmp_path, settings):
    path = tmp_path / "twice.jsonl"
    line = json.dumps({"user_id": "ana", "text": "hi", "id": "6a1f5d1e-0b8f-4f7e-9a0c-3f5e1d2c4b6a"})
    path.write_text(f"{line}\n{line}\n")
    assert len(read_file(path, None, settings)) == 1


@pytest.mark.parametrize("turn", [Turn(text="hello", role="r" * 33), Turn(text="hello", speaker="s" * 129),
                                  Turn(text="hello", session_id="s" * 129)])
def test_a_role_speaker_or_session_wider_than_its_column_is_refused_as_over_http(service, tmp_path, settings, turn):
    """The HTTP models refuse them (422); an import file reached the store with them, where
    SQLite kept them (an export no restore would load) and PostgreSQL failed the batch."""
    with pytest.raises(Invalid, match="the limit is"):
        service.import_turns("ana", [turn])
    assert service.users() == []
    line = {"user_id": "ana", "text": turn.text, "role": turn.role, "speaker": turn.speaker,
            "session_id": turn.session_id}
    path = tmp_path / "wide.jsonl"
    path.write_text(json.dumps(line) + "\n")
    with pytest.raises(Invalid, match="line 1: the .* of message 1 is 1?[23][39] characters"):
        read_file(path, None, settings)
