"""The writer-disjoint held-out set (scripts/heldout, read by scripts/eval_heldout.py) is well formed:
ids are unique, a trigger or indirect question shares no content word with the turn it must recall
(else it would measure similarity, not association), and the evaluation refuses a set that does not
fit its LoCoMo conversation (LoCoMo itself is not in the repository: eval_heldout.py checks it there)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

REPO = Path(__file__).resolve().parents[2]
HELDOUT = REPO / "scripts" / "heldout"
KINDS = {"cause", "state", "goal", "value"}

# Texting filler on top of scikit-learn's English stopwords; a contraction ("i'm", "can't") is a
# function word too. Everything else of three letters or more is a content word.
FILLER = {"lol", "omg", "btw", "tbh", "ngl", "rn", "lowkey", "fr", "haha", "ugh", "yeah", "ya", "okay", "gonna",
          "wanna", "gotta", "tho", "thx", "thanks", "really", "just", "like", "got", "get", "say", "said", "know",
          "need", "want", "thing", "things", "lot", "way", "make", "made", "right", "yes", "one", "two"}


def heldout_sets() -> list[dict]:
    return [json.loads(path.read_text(encoding="utf-8")) for path in sorted(HELDOUT.glob("conv-*.json"))]


def content_stems(text: str) -> set[str]:
    """Lower-cased words of 3+ characters that are not stopwords, cut to 5 characters so that
    'saturday' and 'saturdays' or 'apply' and 'applying' count as the same word."""
    words = [re.sub(r"'s$", "", w.strip("'")) for w in re.findall(r"[a-z0-9']+", text.lower().replace("’", "'"))]
    return {w[:5] for w in words if len(w) >= 3 and "'" not in w and w not in ENGLISH_STOP_WORDS and w not in FILLER}


def test_content_stems_catch_a_repeated_word_and_ignore_filler():
    assert content_stems("signed up for the Saturday shift lol") & content_stems("no more saturdays for me")
    assert not content_stems("i'm gonna be there tho") & content_stems("you're there too, right?")


def test_counts_kinds_and_unique_ids():
    sets = heldout_sets()
    assert len(sets) == 10 and len({s["conversation"] for s in sets}) == 10
    pairs = [p for s in sets for p in s["cue_pairs"]]
    facts = [f for s in sets for f in s["indirect_facts"]]
    assert len(pairs) >= 70 and len(facts) >= 35
    ids = [p["id"] for p in pairs] + [f["id"] for f in facts]
    assert len(ids) == len(set(ids))
    assert {p["kind"] for p in pairs} == KINDS
    for s in sets:
        assert len(s["cue_pairs"]) >= 6 and len(s["indirect_facts"]) >= 3, s["conversation"]
        assert all(i["id"].startswith(s["conversation"] + "-") for i in s["cue_pairs"] + s["indirect_facts"])


def test_every_text_is_distinct():
    texts = [turn["text"] for s in heldout_sets() for item in s["cue_pairs"] + s["indirect_facts"]
             for key, turn in item.items() if isinstance(turn, dict)]
    assert len(texts) == len(set(texts))


@pytest.mark.parametrize("heldout", heldout_sets(), ids=lambda s: s["conversation"])
def test_triggers_and_indirect_questions_share_no_content_word_with_their_cue(heldout):
    overlaps = {}
    for pair in heldout["cue_pairs"]:
        shared = content_stems(pair["cue"]["text"]) & content_stems(pair["trigger"]["text"])
        if shared:
            overlaps[pair["id"]] = shared
    for item in heldout["indirect_facts"]:
        shared = content_stems(item["fact"]["text"]) & content_stems(item["indirect"]["text"])
        if shared:
            overlaps[item["id"]] = shared
    assert not overlaps


def eval_heldout():
    """scripts/eval_heldout.py as a module (scripts/ is no package)."""
    spec = importlib.util.spec_from_file_location("eval_heldout", REPO / "scripts" / "eval_heldout.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tiny_locomo() -> dict:
    """A LoCoMo-shaped conversation of four sessions, a week apart, two turns each."""
    conv = {"speaker_a": "Rosa", "speaker_b": "Ilse"}
    for n, date in enumerate(["1 May, 2023", "8 May, 2023", "15 May, 2023", "22 May, 2023"], 1):
        conv[f"session_{n}_date_time"] = f"7:00 pm on {date}"
        conv[f"session_{n}"] = [{"speaker": "Rosa", "dia_id": f"D{n}:1", "text": "hi"},
                                {"speaker": "Ilse", "dia_id": f"D{n}:2", "text": "hey"}]
    return {"sample_id": "conv-x", "conversation": conv}


def pair(cue: dict, trigger: dict) -> dict:
    return {"cue_pairs": [{"id": "conv-x-cue-1", "kind": "state", "cue": cue, "trigger": trigger}],
            "indirect_facts": []}


def test_the_evaluation_refuses_a_set_that_does_not_fit_its_conversation():
    misfits = eval_heldout().misfits
    cue = {"session": "session_1", "after": 1, "speaker": "Rosa", "text": "my knee is acting up again"}
    assert misfits(tiny_locomo(), pair(cue, {"session": "session_4", "speaker": "Ilse", "text": "stairs?"})) == []
    assert misfits(tiny_locomo(), pair({**cue, "after": 2}, {"session": "session_4", "speaker": "Ilse", "text": "x"}))
    assert misfits(tiny_locomo(), pair({**cue, "speaker": "Jo"}, {"session": "session_4", "speaker": "Ilse",
                                                                  "text": "x"}))
    assert misfits(tiny_locomo(), pair(cue, {"session": "session_2", "speaker": "Ilse", "text": "x"}))  # 7 days
    assert misfits(tiny_locomo(), pair({**cue, "session": "session_3"}, {"session": "session_4", "speaker": "Ilse",
                                                                          "text": "x"}))


def test_the_written_anticipations_cover_each_inserted_turn_once_and_never_copy_a_later_message():
    """scripts/eval_anticipation.py reads what an extraction model wrote for every cue and fact
    turn: one record per turn, items and four to six anticipations, none of them the trigger or
    question it will be measured against (that would measure a copy, not an anticipation)."""
    records = [json.loads(line) for line in (HELDOUT / "anticipations.jsonl").read_text(encoding="utf-8").splitlines()]
    sets = heldout_sets()
    turns = {f"{pair['id']}:cue": pair["trigger"]["text"] for conv in sets for pair in conv["cue_pairs"]}
    turns |= {f"{item['id']}:fact": item["indirect"]["text"] + "\n" + item["direct"]["text"]
              for conv in sets for item in conv["indirect_facts"]}
    assert sorted(r["id"] for r in records) == sorted(turns)
    for record in records:
        assert 1 <= len(record["items"]) <= 3 and 4 <= len(record["anticipations"]) <= 6, record["id"]
        later = turns[record["id"]].lower()
        assert not any(line.lower() in later or later in line.lower() for line in record["anticipations"]), record["id"]


def test_the_service_evaluation_extracts_each_inserted_turn_as_its_written_record(monkeypatch):
    """scripts/eval_anticipation_service.py plays the extraction LLM: whoever says an inserted
    turn (a distractor is another speaker saying its text), the answer is that turn's record, its
    anticipations on the first item; a turn it has no record for yields nothing and is noted."""
    monkeypatch.syspath_prepend(str(REPO / "scripts"))
    spec = importlib.util.spec_from_file_location("eval_anticipation_service",
                                                  REPO / "scripts" / "eval_anticipation_service.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    records = module.load(module.ANTICIPATIONS)
    sets = {data["conversation"]: data for data in heldout_sets()}
    missed: list[str] = []
    extract = module.scripted_extraction(records, sets, missed)
    for data in sets.values():
        for turn_id, insertion in module.heldout.inserted_turns(data):
            items = extract([f"Someone Else: {insertion['text']}", "Someone Else: see you tomorrow"])["items"]
            assert [i["text"] for i in items] == records[turn_id]["items"]
            assert [i["anticipations"] for i in items] == [records[turn_id]["anticipations"]] + [[]] * (len(items) - 1)
    assert set(missed) == {"Someone Else: see you tomorrow"}
