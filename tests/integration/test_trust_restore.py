"""Findings 7 and 12: restore works in a store that is in use and loads only the manifest
user's own rows; an export is one consistent snapshot even while the store changes."""

from __future__ import annotations

import hashlib
import json

import pytest

from dcpm.admin import export
from dcpm.api.models import ConsentUpdate, SearchRequest
from dcpm.consolidation.graph import add_evidence, create_node
from dcpm.errors import Invalid
from dcpm.service import MemoryService
from dcpm.store.items import NewItem, add_item, update_text
from dcpm.store.models import Item, RawInput

from .scenarios import ANA_TURNS, BOB_TURNS, ana_drinks_chain, at

pytestmark = pytest.mark.storage  # these run on SQLite and on PostgreSQL (tests/conftest.py)


def answers(svc, user="ana") -> list:
    queries = ["what does Ana drink", "greyhound", "half marathon"]
    return [[(h.id, h.text, [link.id for link in h.chain or []]) for h in
             svc.search(SearchRequest(user_id=user, query=q)).hits] for q in queries]


def ana_and_bob(service):
    service.import_turns("bob", list(BOB_TURNS))
    bobs = ana_drinks_chain(service, user_id="bob")
    service.import_turns("ana", list(ANA_TURNS))
    coffee, black, green = ana_drinks_chain(service)
    service.update_memory(green.id, "Ana now only drinks green tea and rooibos")  # an item revision
    with service.db.session() as session:
        drinks = create_node(session, "ana", "schema", "Ana keeps changing what she drinks", "food", None)
        add_evidence(session, drinks, [black.id, green.id], None)
    service.consent("ana", ConsentUpdate(core_schemas=True))
    return bobs


def rewritten(path, change) -> None:
    """The export with `change(type, row)` applied to every record and a matching checksum:
    what someone who edits their own export can produce."""
    lines = path.read_text().splitlines()
    manifest = json.loads(lines[0])["manifest"]
    body = []
    for line in lines[1:]:
        record = json.loads(line)
        change(record["type"], record["row"])
        body.append(json.dumps(record, sort_keys=True))
    manifest["sha256"] = hashlib.sha256("\n".join(body).encode()).hexdigest()
    path.write_text("\n".join([json.dumps({"manifest": manifest})] + body) + "\n")


def test_a_user_restored_into_a_store_in_use_answers_as_before(service, settings, embedder, tmp_path,
                                                               another_database):
    ana_and_bob(service)
    before, bobs_before = answers(service), answers(service, "bob")
    path = tmp_path / "ana.jsonl"
    service.export_user("ana", path)
    service.delete_user("ana")
    service.restore(path)  # the same store: its events and revisions keep their ids
    assert answers(service) == before and answers(service, "bob") == bobs_before
    other = MemoryService(settings.model_copy(update={"data_dir": tmp_path / "other", "database_url": another_database}),
                          embedder=embedder)
    try:
        ana_and_bob(other)
        other.delete_user("ana")
        other.restore(path)  # another store, with users and events of its own
        assert answers(other) == before
        green = other.list_memories("ana", kind="identity", status="current").items[0]
        assert [r.text for r in other.get(green.id).revisions] == ["Ana now only drinks green tea, no caffeine after noon"]
    finally:
        other.close()


@pytest.mark.parametrize("target", ["raw_input", "item", "node", "consent", "event"])
def test_a_restore_that_writes_rows_for_another_user_is_refused(service, tmp_path, target):
    ana_and_bob(service)
    path = tmp_path / "ana.jsonl"
    service.export_user("ana", path)
    service.delete_user("ana")
    rewritten(path, lambda kind, row: row.update(user_id="bob") if kind == target else None)
    bob = [m.id for m in service.list_memories("bob", kind="raw").items]
    with pytest.raises(Invalid, match="bob"):
        service.restore(path)
    assert [u.id for u in service.users()] == ["bob"]
    assert [m.id for m in service.list_memories("bob", kind="raw").items] == bob


def test_a_restore_cannot_join_another_users_chain_or_request(service, tmp_path):
    bob_coffee, _, _ = ana_and_bob(service)
    bob_request = service.list_memories("bob", kind="raw").items[0]
    path = tmp_path / "ana.jsonl"
    service.export_user("ana", path)
    service.delete_user("ana")
    chain_path, request_path = tmp_path / "chain.jsonl", tmp_path / "request.jsonl"
    chain_path.write_text(path.read_text())
    request_path.write_text(path.read_text())
    rewritten(chain_path, lambda kind, row: row.update(chain_id=bob_coffee.chain_id) if kind == "item" else None)
    with service.db.session() as session:
        request_id = session.get(RawInput, bob_request.id).request_id
    rewritten(request_path, lambda kind, row: row.update(request_id=request_id) if kind == "raw_input" else None)
    for crafted in (chain_path, request_path):
        with pytest.raises(Invalid, match="another user"):
            service.restore(crafted)
    assert service.users()[0].id == "bob" and len(service.users()) == 1


def test_a_broken_row_is_invalid_not_a_server_error(service, tmp_path):
    ana_and_bob(service)
    path = tmp_path / "ana.jsonl"
    service.export_user("ana", path)
    service.delete_user("ana")
    rewritten(path, lambda kind, row: row.update(text=None, valid_from="someday") if kind == "item" else None)
    with pytest.raises(Invalid):
        service.restore(path)


def test_an_export_taken_while_the_store_changes_is_one_snapshot(service, settings, embedder, tmp_path, monkeypatch,
                                                                 another_database):
    ana_and_bob(service)
    rows_of = export._rows_of

    def meanwhile(session, model, user_id):  # System 1 commits between two of the export's SELECTs
        rows = rows_of(session, model, user_id)
        if model is Item:
            with service.db.session() as other:
                cello = add_item(other, "ana", NewItem("fact", "Ana started the cello", valid_from=at(2025, 7, 1)))
                update_text(other, cello, "Ana started the cello in July")
        return rows

    monkeypatch.setattr(export, "_rows_of", meanwhile)
    path = tmp_path / "ana.jsonl"
    manifest = service.export_user("ana", path)
    assert manifest["counts"]["item"] == 3 and manifest["counts"]["item_revision"] == 1
    other = MemoryService(settings.model_copy(update={"data_dir": tmp_path / "other", "database_url": another_database}),
                          embedder=embedder)
    try:
        other.restore(path)
        assert other.list_memories("ana", kind="items").total == 3
    finally:
        other.close()


@pytest.mark.parametrize("kind", ["raw_input", "item", "node"])
def test_a_restore_cannot_take_over_another_users_memory_id(service, tmp_path, kind):
    """Raw turns, items and nodes share one id space and one vector point per id: an edited
    export whose row reuses bob's raw turn id would make bob's memory unreadable and undeletable."""
    ana_and_bob(service)
    bob_turn = service.list_memories("bob", kind="raw").items[0]
    path = tmp_path / "ana.jsonl"
    service.export_user("ana", path)
    service.delete_user("ana")
    records = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    ana_id = next(r["row"]["id"] for r in records if r["type"] == kind)

    def reuse(record_kind, row):  # type: ignore[no-untyped-def]
        row.update({key: bob_turn.id for key, value in row.items() if value == ana_id})  # and what points at it

    rewritten(path, reuse)
    with pytest.raises(Invalid, match="another user's memory"):
        service.restore(path)
    assert [u.id for u in service.users()] == ["bob"]
    assert service.get(bob_turn.id).text == bob_turn.text
    hits = service.search(SearchRequest(user_id="bob", query=bob_turn.text, threshold=0)).hits
    assert hits and hits[0].id == bob_turn.id
