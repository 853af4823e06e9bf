"""The rules anticipations are kept by: a companion id names its item and nothing else, what the
store keeps of what a model wrote, and nothing asked for or kept when the setting is off."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

import pytest

from dcpm.admin.restore_values import check_values
from dcpm.errors import Invalid
from dcpm.index.anticipation import companion_id, owner_of
from dcpm.llm.prompts.extract import ExtractionAnswer, render
from dcpm.store.items import anticipation_lines
from dcpm.store.models import Item
from dcpm.write.reconcile import extracted_items


def test_a_companion_id_leads_back_to_its_item_and_never_to_another_memory():
    for make in (uuid.uuid4, lambda: uuid.uuid5(uuid.NAMESPACE_URL, "imported turn")):
        memory_id = str(make())
        companion = companion_id(memory_id)
        assert companion != memory_id and owner_of(companion) == memory_id
        assert owner_of(memory_id) is None  # no memory id (version 4 or 5) reads as a companion
        assert str(uuid.UUID(companion)) == companion  # a UUID every backend takes as a point id


def test_the_store_keeps_distinct_single_lines_and_at_most_six():
    written = ["  Ana books\na flight ", "Ana books a flight", "", "x" * 400, *[f"situation {n}" for n in range(9)]]
    kept = anticipation_lines(written).split("\n")
    assert kept[0] == "Ana books a flight" and kept[1] == "x" * 300 and len(kept) == 6
    assert anticipation_lines(["", "   "]) is None


def test_a_keen_model_with_ten_anticipations_is_cut_not_refused():
    answer = ExtractionAnswer.model_validate({"items": [
        {"kind": "fact", "text": "Ana is allergic to latex", "anticipations": [f"case {n}" for n in range(10)]}]})
    assert len(answer.items[0].anticipations) == 6


def test_nothing_is_asked_for_or_kept_with_the_setting_off():
    answer = ExtractionAnswer.model_validate({"items": [
        {"kind": "fact", "text": "Ana is allergic to latex", "anticipations": ["Ana has a dental check-up"]}]})
    noon = datetime(2025, 1, 1, 12, tzinfo=timezone.utc)
    assert extracted_items(answer, noon, True)[0].anticipations == ("Ana has a dental check-up",)
    assert extracted_items(answer, noon, False)[0].anticipations == ()
    assert "anticipations:" in render(["Ana: hi"], [], "t", "Ana", anticipate=True)[0]
    assert "anticipations:" not in render(["Ana: hi"], [], "t", "Ana", anticipate=False)[0]


@pytest.mark.parametrize("lines", ["\n".join(f"case {n}" for n in range(7)), "a\n\nb", "x" * 301, "a\na"])
def test_a_restore_refuses_anticipations_no_extraction_could_have_stored(lines):
    with pytest.raises(Invalid, match="anticipations"):
        check_values("item", Item, {"anticipations": lines})
    check_values("item", Item, {"anticipations": "case 1\ncase 2"})
