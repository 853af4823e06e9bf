"""Export a user with chains and a graph, restore elsewhere: the same answers."""

from __future__ import annotations

import json

import pytest

from dcpm.api.models import ConsentUpdate, SearchRequest
from dcpm.errors import Conflict, Invalid
from dcpm.service import MemoryService

from .scenarios import ANA_TURNS, ana_drinks_chain

pytestmark = pytest.mark.storage  # these run on SQLite and on PostgreSQL (tests/conftest.py)


def answers(svc) -> list:
    queries = ["what does Ana drink", "greyhound", "half marathon"]
    return [[(h.id, h.text, [link.id for link in h.chain or []]) for h in
             svc.search(SearchRequest(user_id="ana", query=q)).hits] for q in queries]


def test_round_trip_gives_identical_search_results(service, settings, embedder, tmp_path, another_database):
    service.import_turns("ana", list(ANA_TURNS))
    ana_drinks_chain(service)
    service.import_turns("bob", list(ANA_TURNS[:1]))
    service.consent("ana", ConsentUpdate(core_schemas=True))
    before = answers(service)
    path = tmp_path / "ana.jsonl"
    manifest = service.export_user("ana", path)
    assert manifest["counts"]["item"] == 3 and manifest["counts"]["raw_input"] == len(ANA_TURNS)
    assert all(json.loads(line)["row"].get("user_id", "ana") == "ana" for line in path.read_text().splitlines()[1:]
               if json.loads(line)["type"] != "item_revision")

    settings2 = settings.model_copy(update={"data_dir": tmp_path / "elsewhere", "database_url": another_database})
    other = MemoryService(settings2, embedder=embedder)
    try:
        other.restore(path)
        assert answers(other) == before
        assert other.consent("ana").core_schemas is True
        assert [u.id for u in other.users()] == ["ana"]
        with pytest.raises(Conflict, match="already exists"):
            other.restore(path)
    finally:
        other.close()


def test_a_damaged_export_is_refused(service, tmp_path):
    service.import_turns("ana", list(ANA_TURNS))
    path = tmp_path / "ana.jsonl"
    service.export_user("ana", path)
    path.write_text(path.read_text().replace("greyhound", "whippet"))
    with pytest.raises(Invalid, match="damaged"):
        service.restore(path)


def test_round_trip_lists_turns_said_at_the_same_moment_in_the_same_order(service, settings, embedder, tmp_path,
                                                                          another_database):
    """A chat export often stamps a whole day's turns with one time; imported in batches, they
    share a moment and their place in a request. Listings (and their pages) keep one order for
    them, and a restored store lists them in that order too."""
    from datetime import datetime, timezone

    from dcpm.domain import Turn

    moment = datetime(2024, 5, 1, 9, 0, tzinfo=timezone.utc)
    for batch in range(4):
        service.import_turns("ana", [Turn(text=f"Ana's note {batch}.{n} about the greyhound", timestamp=moment)
                                     for n in range(3)])

    def listed(svc: MemoryService) -> list[str]:
        return [row.text for row in svc.list_memories("ana", kind="raw").items]

    pages = [row.text for offset in range(0, 12, 5) for row in
             service.list_memories("ana", kind="raw", limit=5, offset=offset).items]
    assert pages == listed(service) and len(set(pages)) == 12
    path = tmp_path / "ana.jsonl"
    service.export_user("ana", path)
    other = MemoryService(settings.model_copy(update={"data_dir": tmp_path / "elsewhere",
                                                      "database_url": another_database}), embedder=embedder)
    try:
        other.restore(path)
        assert listed(other) == listed(service)
    finally:
        other.close()
