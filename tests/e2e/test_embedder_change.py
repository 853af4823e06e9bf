"""An operator switches the embedder of a store that already holds memories, through the CLI:
the new model is refused with a message that says what to run, `dcpm reindex` rebuilds the index
from the store with it, and every memory is found again. The second model is a real one of the
same dimension (384), so only its weights tell it apart."""

from __future__ import annotations

import json
from pathlib import Path

from dcpm.config import DEFAULT_EMBEDDER
from dcpm.testing.daemon import free_port

from .daemon import run_cli

TURNS = ("My greyhound Biscuit hides under the bed whenever it thunders",
         "I moved to Porto last spring for the job at the bakery on Rua das Flores")


def another_model(folder: Path) -> Path:
    """all-MiniLM-L6-v2 with every weight nudged, saved as a model folder: the machine has no
    second model to hand, and this one's vectors differ from the original's while their shape
    does not."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from dcpm.embedding.flag_dense import resolve_model_path

    source = resolve_model_path(DEFAULT_EMBEDDER)
    model = AutoModel.from_pretrained(source)
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for weight in model.parameters():
            weight.add_(torch.randn(weight.shape, generator=generator) * 0.02)
    model.save_pretrained(folder, safe_serialization=True)
    AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    return folder


def test_switching_the_embedder_is_refused_until_reindex_and_then_finds_everything(tmp_path):
    data_dir = tmp_path / "data"
    for text in TURNS:
        run_cli(data_dir, "add", "ana", text)
    model = str(another_model(tmp_path / "minilm-nudged"))

    refused = run_cli(data_dir, "search", "ana", "dog scared of storms", check=False, DCPM_EMBEDDER=model)
    said = " ".join((refused.stdout + refused.stderr).split())
    assert refused.returncode != 0
    assert "built for another embedder" in said and "run `dcpm reindex`" in said and "minilm-nudged" in said

    rebuilt = run_cli(data_dir, "reindex", DCPM_EMBEDDER=model)
    assert "reindexed 2 point(s)" in rebuilt.stdout

    found = json.loads(run_cli(data_dir, "search", "ana", "dog scared of storms", "--json",
                               DCPM_EMBEDDER=model).stdout)
    assert {hit["text"] for hit in found["hits"]} <= set(TURNS) and found["hits"][0]["text"] == TURNS[0]
    listed = json.loads(run_cli(data_dir, "items", "ana", "--kind", "raw", "--json").stdout)
    assert sorted(m["text"] for m in listed["items"]) == sorted(TURNS)  # the store lost nothing

    stale = run_cli(data_dir, "serve", "--port", str(free_port()), check=False)  # a daemon on the old model
    assert stale.returncode != 0 and "built for another embedder" in " ".join(stale.stderr.split())
