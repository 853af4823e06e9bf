"""Corpus filters without an LLM or a model: a toy embedding where each text names its direction."""

from __future__ import annotations

import json

import numpy as np

from dcpm.adapter.training.curation import corpus_stats, decontaminate, drop_similar_pairs, evaluation_texts
from dcpm.adapter.training.lives import Life

DIRECTIONS = {
    "I take warfarin since my valve surgery": [1, 0, 0, 0],
    "Tips for getting into mountain biking?": [0, 1, 0, 0],
    "My warfarin dose changed again": [0.95, 0.31, 0, 0],  # close to the fact: teaches similarity
    "Which bike helmet should I buy?": [0.3, 0, 0, 0.95],
    "What blood thinner am I on?": [0.7, 0, 0.71, 0],
    "I promised my sister I'd run the Porto half": [0, 0, 0, 1],
    "New running shoes, which ones?": [0, 0.6, 0, 0.3],
    "When is the Porto half marathon?": [0, 0, 0.2, 0.98],
}


def embed(texts):
    rows = np.array([DIRECTIONS[t] for t in texts], dtype=np.float32).reshape(len(texts), 4)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True).clip(min=1e-9)


def ana() -> Life:
    return Life.model_validate({
        "persona_id": "assistant-001", "source": "assistant", "age": 52, "job": "pharmacist", "place": "Leeds",
        "facts": [
            {"kind": "a medication they take", "area": "health", "fact": "I take warfarin since my valve surgery",
             "later": ["Tips for getting into mountain biking?", "My warfarin dose changed again",
                       "Which bike helmet should I buy?"], "direct": "What blood thinner am I on?"},
            {"kind": "a goal", "area": "family", "fact": "I promised my sister I'd run the Porto half",
             "later": ["New running shoes, which ones?"], "direct": "When is the Porto half marathon?"},
        ]})


def test_later_messages_similar_to_their_statement_are_dropped_and_direct_questions_kept():
    kept, dropped = drop_similar_pairs([ana()], embed, max_cos=0.5)
    warfarin = kept[0].facts[0]
    assert warfarin.later == ["Tips for getting into mountain biking?", "Which bike helmet should I buy?"]
    assert warfarin.direct == "What blood thinner am I on?"
    assert dropped == {"assistant": 1}


def test_rows_close_to_an_evaluation_text_are_dropped_and_a_contaminated_fact_takes_its_rows():
    reference = embed(["When is the Porto half marathon?", "Which bike helmet should I buy?"])
    kept, dropped = decontaminate([ana()], embed, reference, max_cos=0.85)
    assert [s.fact for s in kept[0].facts] == ["I take warfarin since my valve surgery"]
    assert kept[0].facts[0].later == ["Tips for getting into mountain biking?", "My warfarin dose changed again"]
    assert dropped == {"assistant:rows": 1 + 2, "assistant:statements": 1}


def test_stats_report_counts_and_mean_earlier_later_cosine_per_source():
    stats = corpus_stats([ana()], embed)
    assert stats["assistant"] == stats["all"]
    assert (stats["all"]["personas"], stats["all"]["facts"], stats["all"]["rows"]) == (1, 2, 6)
    assert 0.0 < stats["all"]["later_cos_mean"] < stats["all"]["direct_cos_mean"]


def test_locomo_evaluation_texts_are_every_turn_and_question(tmp_path):
    locomo = [{"sample_id": "conv-1", "qa": [{"question": "Where did Caroline move from?"}],
               "conversation": {"speaker_a": "Caroline", "session_1_date_time": "1:56 pm on 8 May, 2023",
                                "session_1": [{"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel!"}]}}]
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps(locomo))
    assert sorted(evaluation_texts(path)) == ["Hey Mel!", "Where did Caroline move from?"]
    plain = tmp_path / "texts.txt"
    plain.write_text("one\n\ntwo\n")
    assert evaluation_texts(plain) == ["one", "two"]


def test_a_heldout_set_gives_its_cues_triggers_facts_and_questions(tmp_path):
    """scripts/heldout/conv-*.json is decontaminated against like LoCoMo: nothing in it may be trained on."""
    heldout = {"conversation": "conv-1",
               "cue_pairs": [{"id": "c1", "cue": {"text": "knee is shot, flat trails only"},
                              "trigger": {"text": "signed up for the downhill half"}}],
               "indirect_facts": [{"id": "f1", "fact": {"text": "on blood thinners since march"},
                                   "indirect": {"text": "booked a huge back tattoo"},
                                   "direct": {"text": "what meds are you on?"}}]}
    path = tmp_path / "conv-1.json"
    path.write_text(json.dumps(heldout))
    assert sorted(evaluation_texts(path)) == sorted([
        "knee is shot, flat trails only", "signed up for the downhill half", "on blood thinners since march",
        "booked a huge back tattoo", "what meds are you on?"])
