"""The simulated-lives corpus: rows, the held-out split, validation errors."""

from __future__ import annotations

import json

import pytest

from dcpm.adapter.training.lives import Life, facts_and_rows, read_lives, rows_hash, split_personas
from dcpm.errors import Invalid


def life(persona_id: str, source: str = "friends", facts: int = 2) -> Life:
    return Life.model_validate({
        "persona_id": persona_id, "source": source, "age": 34, "job": "baker", "place": "Porto",
        "facts": [{"kind": "a goal", "area": "sport and fitness", "fact": f"{persona_id} fact {n}",
                   "later": [f"{persona_id} later {n}.{k}" for k in range(3)], "direct": f"{persona_id} direct {n}?"}
                  for n in range(facts)],
    })


def test_every_later_message_and_direct_question_is_a_row_pointing_to_its_fact():
    facts, rows = facts_and_rows([life("ana"), life("bo", "assistant")])
    assert len(facts) == 4 and len(rows) == 16
    pointing_to_first = {row.query for row in rows if facts[row.fact].text == "ana fact 0"}
    assert pointing_to_first == {"ana later 0.0", "ana later 0.1", "ana later 0.2", "ana direct 0?"}
    assert all(facts[row.fact].persona_id == row.persona_id for row in rows)
    assert sum(row.kind == "direct" for row in rows) == 4


def test_held_out_personas_come_from_every_source_and_repeat_with_the_seed():
    lives = [life(f"a{n}", "assistant") for n in range(20)] + [life(f"f{n}", "friends") for n in range(20)]
    training, heldout = split_personas(lives, holdout=0.05, seed=0)
    assert sorted(x.source for x in heldout) == ["assistant", "friends"]
    assert len(training) + len(heldout) == 40
    assert not {x.persona_id for x in training} & {x.persona_id for x in heldout}
    assert [x.persona_id for x in split_personas(lives, 0.05, 0)[1]] == [x.persona_id for x in heldout]
    assert split_personas(lives, holdout=0.0, seed=0)[1] == []


def test_data_hash_changes_with_the_rows():
    facts, rows = facts_and_rows([life("ana")])
    assert rows_hash(facts, rows) == rows_hash(facts, list(rows))
    assert rows_hash(facts, rows) != rows_hash(facts, rows[:-1])


def test_a_bad_corpus_line_names_its_file_and_line(tmp_path):
    path = tmp_path / "lives.jsonl"
    path.write_text(life("ana").model_dump_json() + "\n" + json.dumps({"persona_id": "bo"}) + "\n")
    with pytest.raises(Invalid, match="lives.jsonl:2"):
        read_lives([path])
