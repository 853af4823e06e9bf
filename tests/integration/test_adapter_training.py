"""Train a tiny adapter on the real model, save it, serve it: the Madeleine contract end to end."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from dcpm.adapter.encoder import AssociativeQueryEncoder
from dcpm.adapter.manifest import MANIFEST_FILE
from dcpm.adapter.training.lives import Life
from dcpm.adapter.training.train import TrainingPlan, train
from dcpm.api.models import SearchRequest
from dcpm.config import Settings
from dcpm.domain import Turn
from dcpm.errors import Invalid

from .scenarios import at

LIVES = [
    {"persona_id": "assistant-001", "source": "assistant", "age": 52, "job": "pharmacist", "place": "Leeds", "facts": [
        {"kind": "a medication they take", "area": "health", "fact": "I've been on warfarin since my valve surgery.",
         "later": ["Looking for tips to get into mountain biking this spring.",
                   "Can I have a big glass of cranberry juice every morning?"],
         "direct": "Which blood thinner do I take?"},
        {"kind": "a pet and its needs", "area": "pets", "fact": "My greyhound Pepper can't be left alone for more "
         "than four hours.", "later": ["Is a day trip to York on Saturday doable?"], "direct": "How long can Pepper "
         "stay alone?"},
    ]},
    {"persona_id": "friends-001", "source": "friends", "age": 29, "job": "line cook", "place": "Porto", "facts": [
        {"kind": "a goal", "area": "sport and fitness", "fact": "I want to run the Porto half marathon in under two "
         "hours this year.", "later": ["Shin splints. Of course.", "1:58:40!!! Crying at the finish."],
         "direct": "Did you make the half marathon time?"},
        {"kind": "a value or principle", "area": "money", "fact": "I never borrow money from family, whatever "
         "happens.", "later": ["Rent went up again and my brother keeps offering to help."],
         "direct": "What's your rule about money and family?"},
    ]},
]
QUERIES = ["Looking for tips to get into mountain biking this spring.", "Shin splints. Of course.",
           "Which blood thinner do I take?"]


@pytest.fixture(scope="module")
def lives() -> list[Life]:
    return [Life.model_validate(life) for life in LIVES]


@pytest.fixture(scope="module")
def trained(embedder, lives, tmp_path_factory):
    """Two steps of real training: enough to move the LoRA away from zero."""
    plan = TrainingPlan.from_settings(Settings(), batch_size=4, lr=1e-3, holdout=0.0, max_steps=2)
    output = tmp_path_factory.mktemp("adapter") / "tiny"
    manifest = train(embedder, lives, plan, output)
    return output, manifest


def test_a_trained_adapter_saves_loads_and_gives_identical_vectors(embedder, trained):
    directory, manifest = trained
    assert manifest.training.steps == 2 and manifest.training.rows == 10
    assert manifest.backbone.fingerprint == embedder.fingerprint()
    merged = AssociativeQueryEncoder(embedder, directory, merge=True).dense_queries(QUERIES)
    unmerged = AssociativeQueryEncoder(embedder, directory, merge=False).dense_queries(QUERIES)
    frozen = embedder.dense(QUERIES)
    np.testing.assert_allclose(merged, unmerged, atol=1e-5)
    assert np.abs(merged - frozen).max() > 1e-3  # the adapter did learn something
    single = AssociativeQueryEncoder(embedder, directory).encode_query(QUERIES[0])
    np.testing.assert_allclose(single.dense, merged[0], atol=1e-5)
    assert single.encoder == "associative:tiny:all-MiniLM-L6-v2"


def test_an_untrained_adapter_ranks_exactly_like_the_frozen_encoder(embedder, lives, tmp_path):
    plan = TrainingPlan.from_settings(Settings(), holdout=0.0, max_steps=0)  # LoRA B is zero: E_θ = E
    train(embedder, lives, plan, tmp_path / "untrained")
    memories = [s.fact for life in lives for s in life.facts]
    bank = embedder.dense(memories)
    adapted = AssociativeQueryEncoder(embedder, tmp_path / "untrained").dense_queries(QUERIES)
    frozen = embedder.dense(QUERIES)
    assert (np.argsort(-adapted @ bank.T, axis=1) == np.argsort(-frozen @ bank.T, axis=1)).all()


def test_an_adapter_trained_for_another_backbone_is_refused(embedder, trained, tmp_path):
    directory = tmp_path / "foreign"
    shutil.copytree(trained[0], directory)
    manifest = json.loads((directory / MANIFEST_FILE).read_text())
    manifest["backbone"].update(name="bge-small-en-v1.5", fingerprint="bge-small-en-v1.5:0123456789abcdef")
    (directory / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(Invalid, match="trained for backbone bge-small-en-v1.5 .* but the embedder is all-MiniLM"):
        AssociativeQueryEncoder(embedder, directory)
    from dcpm.service import MemoryService

    with pytest.raises(Invalid, match="DCPM_QUERY_ADAPTER=none"):
        MemoryService(Settings(data_dir=tmp_path / "data", query_adapter=str(directory)), embedder=embedder)


def test_enabling_an_adapter_changes_only_the_query_vector_never_the_index(embedder, trained, tmp_path):
    from dcpm.service import MemoryService

    facts = [statement["fact"] for life in LIVES for statement in life["facts"]]
    turns = [Turn(text=fact, speaker="Ana", timestamp=at(2025, 1, n + 1)) for n, fact in enumerate(facts)]
    frozen_service = MemoryService(Settings(data_dir=tmp_path, query_adapter="none"), embedder=embedder)
    frozen_service.import_turns("ana", turns)
    ids = [raw.id for raw in frozen_service.list_memories("ana", kind="raw").items]
    before = (frozen_service.index.count(), frozen_service.index.dense_vectors(ids))
    frozen_hits = frozen_service.search(SearchRequest(user_id="ana", query=QUERIES[0]))
    frozen_service.close()

    adapted_service = MemoryService(Settings(data_dir=tmp_path, query_adapter=str(trained[0])), embedder=embedder)
    try:
        after = (adapted_service.index.count(), adapted_service.index.dense_vectors(ids))
        adapted_hits = adapted_service.search(SearchRequest(user_id="ana", query=QUERIES[0]))
    finally:
        adapted_service.close()
    assert before[0] == after[0] == len(turns)
    assert all(np.array_equal(before[1][i], after[1][i]) for i in ids)
    assert frozen_hits.encoder == "frozen:all-MiniLM-L6-v2"
    assert adapted_hits.encoder == "associative:tiny:all-MiniLM-L6-v2"
    assert {h.id for h in adapted_hits.hits} == {h.id for h in frozen_hits.hits}
    assert [h.dense_score for h in adapted_hits.hits] != [h.dense_score for h in frozen_hits.hits]


def test_an_adapter_trained_in_the_adapted_form_serves_one_pass_of_e_theta(embedder, lives, tmp_path):
    """query_form="adapted": the query vector is E_θ(q) alone (one merged pass), and the manifest
    says so, so the read path serves the score that was trained."""
    plan = TrainingPlan.from_settings(Settings(), batch_size=4, lr=1e-3, holdout=0.0, max_steps=2,
                                      query_form="adapted")
    manifest = train(embedder, lives, plan, tmp_path / "one-pass")
    assert manifest.training.hyperparameters["query_form"] == "adapted"
    encoder = AssociativeQueryEncoder(embedder, tmp_path / "one-pass")
    served = encoder.dense_queries(QUERIES)
    adapted_alone = embedder.dense_each(QUERIES, [encoder.adapted])[0]
    np.testing.assert_allclose(served, adapted_alone, atol=1e-5)
    assert np.abs(served - embedder.dense(QUERIES)).max() > 1e-3
    np.testing.assert_allclose(encoder.encode_query(QUERIES[0]).dense, served[0], atol=1e-5)


def test_an_unknown_query_form_is_refused():
    with pytest.raises(Invalid, match="query form 'both' is not one of summed, adapted"):
        TrainingPlan.from_settings(Settings(), query_form="both")


def test_strength_scales_the_adapter_between_the_frozen_encoder_and_the_trained_one(embedder, trained, tmp_path):
    """W + s·BA: strength 0 serves E itself, 1 the adapter as trained; a manifest's strength is
    the default and DCPM_ADAPTER_STRENGTH overrides it."""
    directory, _ = trained
    frozen = embedder.dense(QUERIES)
    full = AssociativeQueryEncoder(embedder, directory, strength=1.0).dense_queries(QUERIES)
    half = AssociativeQueryEncoder(embedder, directory, strength=0.5).dense_queries(QUERIES)
    none = AssociativeQueryEncoder(embedder, directory, strength=0.0).dense_queries(QUERIES)
    np.testing.assert_allclose(none, frozen, atol=1e-5)
    assert 1e-4 < np.abs(half - frozen).max() < np.abs(full - frozen).max()
    copy = tmp_path / "at-half"
    shutil.copytree(directory, copy)
    manifest = json.loads((copy / MANIFEST_FILE).read_text())
    (copy / MANIFEST_FILE).write_text(json.dumps({**manifest, "strength": 0.5}))
    np.testing.assert_allclose(AssociativeQueryEncoder(embedder, copy).dense_queries(QUERIES), half, atol=1e-5)
    np.testing.assert_allclose(AssociativeQueryEncoder(embedder, copy, strength=1.0).dense_queries(QUERIES), full,
                               atol=1e-5)
