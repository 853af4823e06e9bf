"""The writer-disjoint held-out set (scripts/heldout, read by scripts/eval_heldout.py) is well formed:
ids are unique, every insertion point exists in LoCoMo, and a trigger or indirect question shares no
content word with the turn it must recall (else it would measure similarity, not association)."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

REPO = Path(__file__).resolve().parents[2]
HELDOUT = REPO / "scripts" / "heldout"
LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "locomo10.json"
KINDS = {"cause", "state", "goal", "value"}

# Texting filler on top of scikit-learn's English stopwords; a contraction ("i'm", "can't") is a
# function word too. Everything else of three letters or more is a content word.
FILLER = {"lol", "omg", "btw", "tbh", "ngl", "rn", "lowkey", "fr", "haha", "ugh", "yeah", "ya", "okay", "gonna",
          "wanna", "gotta", "tho", "thx", "thanks", "really", "just", "like", "got", "get", "say", "said", "know",
          "need", "want", "thing", "things", "lot", "way", "make", "made", "right", "yes", "one", "two"}


def session_date(conv: dict, turn: dict) -> datetime:
    return datetime.strptime(conv[f"{turn['session']}_date_time"], "%I:%M %p on %d %B, %Y")


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


@pytest.mark.skipif(not LOCOMO.exists(), reason=f"LoCoMo is not at {LOCOMO}")
@pytest.mark.parametrize("heldout", heldout_sets(), ids=lambda s: s["conversation"])
def test_insertions_fit_their_locomo_conversation(heldout):
    sample = next(s for s in json.loads(LOCOMO.read_text(encoding="utf-8"))
                  if s["sample_id"] == heldout["conversation"])
    conv = sample["conversation"]
    speakers = {conv["speaker_a"], conv["speaker_b"]}
    sessions = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
    inserted = [p["cue"] for p in heldout["cue_pairs"]] + [f["fact"] for f in heldout["indirect_facts"]]
    later = ([(p["cue"], p["trigger"]) for p in heldout["cue_pairs"]]
             + [(f["fact"], f[q]) for f in heldout["indirect_facts"] for q in ("indirect", "direct")])
    for turn in inserted:
        assert -1 <= turn["after"] < len(conv[turn["session"]]), turn
    for earlier, query in later:
        assert query["speaker"] in speakers and earlier["speaker"] in speakers
        assert session_date(conv, query) - session_date(conv, earlier) >= timedelta(days=14), query  # weeks later
    assert all(int(t["session"].split("_")[1]) <= sessions[len(sessions) // 2] for t in inserted)
