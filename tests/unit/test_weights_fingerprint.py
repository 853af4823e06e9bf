"""An index and an adapter are pinned to the weights that made them: a model whose change lies
past the first MiB of its weights file (a LoRA merged into the attention layers keeps the file's
size and its first MiB) is another model, while what was recorded in the fingerprint's first
form still matches the model it was made with."""

from __future__ import annotations

import numpy as np
import pytest
from safetensors.numpy import save_file

from dcpm.adapter.manifest import AdapterManifest, Backbone, TrainingRecord, check_backbone
from dcpm.embedding.fingerprint import same_weights, weights_fingerprint
from dcpm.errors import Invalid
from dcpm.index.identity import IndexIdentity


def tiny_model(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Laid out as a BERT file is: the word embeddings (2 MiB) come first in the file."""
    return {
        "embeddings.word_embeddings.weight": rng.standard_normal((2048, 256)).astype(np.float32),
        "encoder.layer.0.attention.self.query.weight": rng.standard_normal((256, 256)).astype(np.float32),
        "encoder.layer.0.attention.self.value.weight": rng.standard_normal((256, 256)).astype(np.float32),
        "encoder.layer.0.output.dense.weight": rng.standard_normal((256, 256)).astype(np.float32),
    }


def saved(tensors: dict[str, np.ndarray], folder) -> str:  # type: ignore[no-untyped-def]
    folder.mkdir()
    save_file(tensors, str(folder / "model.safetensors"))
    return str(folder)


@pytest.fixture
def models(tmp_path):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(7)
    original = tiny_model(rng)
    merged = dict(original)
    for name in ("encoder.layer.0.attention.self.query.weight", "encoder.layer.0.attention.self.value.weight"):
        b, a = rng.standard_normal((256, 8)) * 0.01, rng.standard_normal((8, 256))
        merged[name] = (original[name] + b @ a).astype(np.float32)  # W + BA, rank 8
    return saved(original, tmp_path / "original"), saved(merged, tmp_path / "merged"), tmp_path


def test_a_merged_lora_past_the_first_mib_is_another_model(models):
    original, merged, _ = models
    first, second = weights_fingerprint(original, "mini"), weights_fingerprint(merged, "mini")
    assert first.split(".")[0] == second.split(".")[0]  # what the first form alone saw: the same model
    assert first != second and not same_weights(first, second) and not same_weights(second, first)


def test_the_same_weights_anywhere_are_the_same_model(models, tmp_path):
    original, _, root = models
    import shutil

    copy = shutil.copytree(original, root / "copy")
    assert weights_fingerprint(str(copy), "mini") == weights_fingerprint(original, "mini")
    assert weights_fingerprint(str(root / "no-weights-here"), "some/hub-name") == "some/hub-name"


def test_a_first_form_record_matches_the_model_it_was_made_with_only(models):
    original, merged, _ = models
    full = weights_fingerprint(original, "mini")
    first_form = full.split(".")[0]
    assert same_weights(first_form, full)
    assert same_weights(first_form, weights_fingerprint(merged, "mini"))  # all the first form could tell
    assert not same_weights(first_form, weights_fingerprint(original, "other-name"))
    assert not same_weights("mini:0123456789abcdef", full)


def test_an_index_recorded_in_the_first_form_serves_and_gets_the_full_fingerprint(models):
    original, merged, _ = models
    full = weights_fingerprint(original, "mini")
    identity = IndexIdentity(dim=384, sparse_idf=True, embedder=full)
    assert identity.settle("the index", {"dim": 384, "sparse_idf": True, "embedder": full.split(".")[0]},
                           replace=False) == "record"
    assert identity.settle("the index", identity.record(), replace=False) == "keep"
    merged_identity = IndexIdentity(dim=384, sparse_idf=True, embedder=weights_fingerprint(merged, "mini"))
    with pytest.raises(Exception, match="dcpm reindex"):
        merged_identity.settle("the index", identity.record(), replace=False)


class Embedder:
    name, pooling, query_instruction = "mini", "mean", ""

    def __init__(self, fingerprint: str):
        self._fingerprint = fingerprint

    def fingerprint(self) -> str:
        return self._fingerprint


def test_an_adapter_trained_on_the_original_is_refused_on_the_merged_model(models):
    original, merged, _ = models
    full = weights_fingerprint(original, "mini")

    def manifest(fingerprint: str) -> AdapterManifest:
        return AdapterManifest(name="a", backbone=Backbone(name="mini", fingerprint=fingerprint),
                               training=TrainingRecord(data_hash="0" * 64, personas=1, facts=1, rows=1))

    check_backbone(manifest(full), Embedder(full))
    check_backbone(manifest(full.split(".")[0]), Embedder(full))  # an adapter from before still loads
    with pytest.raises(Invalid, match="trained for backbone mini"):
        check_backbone(manifest(full), Embedder(weights_fingerprint(merged, "mini")))


def test_a_hub_name_is_known_by_the_weights_in_the_local_cache(models, tmp_path, monkeypatch):
    """`BAAI/bge-m3` names whatever revision the hub cache holds: an upstream update is another
    model, looked up on disk only; an index recorded under the name alone still serves."""
    import shutil

    from huggingface_hub import constants

    original, merged, _ = models
    snapshot = tmp_path / "hub" / "models--org--mini" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("abc123")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))

    shutil.copy(f"{original}/model.safetensors", snapshot / "model.safetensors")
    cached = weights_fingerprint("org/mini", "org/mini")
    assert cached == weights_fingerprint(original, "mini") and same_weights("org/mini", cached)
    shutil.copy(f"{merged}/model.safetensors", snapshot / "model.safetensors")  # the repo was updated
    assert not same_weights(cached, weights_fingerprint("org/mini", "org/mini"))
