"""Restore against exports someone edited and re-checksummed: what the export's lines and rows
hold must be what dcpm itself writes, or the restore is refused (422) with nothing loaded, and
every user, the restored one included, goes on being served."""

from __future__ import annotations

import hashlib
import json

import pytest
from fastapi.testclient import TestClient

from dcpm.index.anticipation import companion_id
from dcpm.server.app import create_app

from .scenarios import ANA_TURNS, BOB_TURNS, ana_drinks_chain
from .test_trust_restore import rewritten

pytestmark = pytest.mark.storage  # these run on SQLite and on PostgreSQL (tests/conftest.py)

NDJSON = {"content-type": "application/x-ndjson"}


@pytest.fixture
def api(service):
    with TestClient(create_app(service)) as client:
        yield client


@pytest.mark.parametrize("manifest", ["1", "[]", '"dcpm-export/1"', "null", "true"])
def test_a_manifest_that_is_not_an_object_is_refused_not_a_server_error(api, manifest):
    response = api.post("/v1/admin/restore", content=f'{{"manifest": {manifest}}}\n'.encode(), headers=NDJSON)
    assert response.status_code == 422, response.text
    assert "not a dcpm export" in response.json()["message"]


def test_a_line_nested_past_the_parsers_stack_is_refused_not_a_server_error(api, service):
    """JSON nested deeper than Python's recursion limit, as the manifest or as a re-checksummed
    record, used to answer 500 (RecursionError)."""
    service.import_turns("bob", list(BOB_TURNS))
    nested = "[" * 100_000 + "]" * 100_000
    manifest = api.post("/v1/admin/restore", content=f"{nested}\n".encode(), headers=NDJSON)
    assert manifest.status_code == 422 and "not a dcpm export" in manifest.json()["message"], manifest.text
    head = {"format": "dcpm-export/1", "user_id": "carl", "sha256": hashlib.sha256(nested.encode()).hexdigest()}
    record = api.post("/v1/admin/restore", content=f"{json.dumps({'manifest': head})}\n{nested}\n".encode(),
                      headers=NDJSON)
    assert record.status_code == 422 and "not a {type, row} object" in record.json()["message"], record.text
    assert [user["id"] for user in api.get("/v1/users").json()] == ["bob"]


def deep(levels: int) -> dict:
    value: dict = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def renamed(memory_id: str, to: str):  # type: ignore[no-untyped-def]
    """Rename one memory everywhere the export names it (its row and the rows pointing at it)."""
    def change(kind, row):  # type: ignore[no-untyped-def]
        row.update({key: to for key, value in row.items() if value == memory_id})
    return change


def one_row(record: str, **values):  # type: ignore[no-untyped-def]
    def change(record_kind, row):  # type: ignore[no-untyped-def]
        if record_kind == record:
            row.update(values)
    return change


EDITS = {
    "metadata that is a list": lambda ids: one_row("raw_input", meta=[1]),
    "metadata that is text": lambda ids: one_row("item", meta="pizza"),
    "metadata holding NaN": lambda ids: one_row("raw_input", meta={"n": float("nan")}),
    "metadata past 64 bits": lambda ids: one_row("item", meta={"n": 10**30}),
    "metadata 200 levels deep": lambda ids: one_row("raw_input", meta=deep(200)),
    "event detail that is a number": lambda ids: one_row("event", detail=5),
    "text that is a number": lambda ids: one_row("raw_input", text=5),
    "text with a NUL": lambda ids: one_row("item", text="Ana\x00drinks tea"),
    "a revision that is a word": lambda ids: one_row("item", revision="x"),
    "a salience of NaN": lambda ids: one_row("item", salience=float("nan")),
    "an unknown item kind": lambda ids: one_row("item", kind="secret"),
    "an unknown turn status": lambda ids: one_row("raw_input", status="bogus"),
    "an unknown event action": lambda ids: one_row("event", action="bogus"),
    "a time that is a number": lambda ids: one_row("raw_input", timestamp=5),
    "a topic longer than its column": lambda ids: one_row("item", topic="t" * 500),
    "an item id that is no UUID": lambda ids: renamed(ids["item"], "zzz"),
    "a turn id in upper case": lambda ids: renamed(ids["raw_input"], ids["raw_input"].upper()),
    # the id of the item's anticipation point (dcpm.index.anticipation): it would shadow another memory
    "an item id of UUID version 8": lambda ids: renamed(ids["item"], companion_id(ids["item"])),
    "anticipations of seven lines": lambda ids: one_row("item", anticipations="\n".join("abcdefg")),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_a_row_holding_what_no_add_could_store_is_refused_and_every_user_is_still_served(
        api, service, tmp_path, edit):
    """Each of these used to load: then every listing of the user answered 500, or the user
    could not be deleted, or (a memory id that is no UUID) every later restore and start-up
    repair failed on its vector point."""
    service.import_turns("bob", list(BOB_TURNS))
    service.import_turns("ana", list(ANA_TURNS))
    ana_drinks_chain(service)
    path, edited = tmp_path / "ana.jsonl", tmp_path / "edited.jsonl"
    service.export_user("ana", path)
    service.delete_user("ana")
    records = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    ids = {kind: next(r["row"]["id"] for r in records if r["type"] == kind) for kind in ("raw_input", "item")}
    edited.write_text(path.read_text())
    rewritten(edited, EDITS[edit](ids))

    refused = api.post("/v1/admin/restore", content=edited.read_bytes(), headers=NDJSON)
    assert refused.status_code == 422, refused.text
    assert [user["id"] for user in api.get("/v1/users").json()] == ["bob"]
    restored = api.post("/v1/admin/restore", content=path.read_bytes(), headers=NDJSON)  # the export as written
    assert restored.status_code == 200, restored.text
    for user, query in (("ana", "what does Ana drink"), ("bob", BOB_TURNS[0].text)):
        assert api.get(f"/v1/users/{user}/items").status_code == 200
        assert api.post("/v1/search", json={"user_id": user, "query": query}).json()["hits"]
    assert api.delete("/v1/users/ana").status_code == 200
