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
