"""The adapter manifest: which backbone an adapter belongs to, what it was trained on, how well.

An adapter only makes sense on top of the exact embedder E that encoded the memories
(Madeleine 4.3: the association is a residual on E's similarity), so the manifest pins E's
weights fingerprint, pooling and query instruction, and loading refuses any other backbone.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from dcpm.embedding.base import AdaptableEmbedder
from dcpm.embedding.fingerprint import same_weights
from dcpm.errors import Invalid

MANIFEST_FILE = "dcpm_adapter.json"
FORMAT = 1


class Backbone(BaseModel):
    """What defines E for the adapter: its weights and how a query becomes a vector."""

    name: str
    fingerprint: str
    pooling: str = "mean"
    query_instruction: str = ""


class TrainingRecord(BaseModel):
    corpus_files: list[str] = Field(default_factory=list)
    data_hash: str = Field(description="sha256 of the training rows (query, fact, source), in order.")
    personas: int
    facts: int
    rows: int
    heldout_personas: list[str] = Field(default_factory=list)
    hyperparameters: dict[str, Any] = Field(default_factory=dict)
    steps: int = 0
    seconds: float = 0.0
    device: str = "cpu"


def query_form(manifest: "AdapterManifest") -> str:
    """"summed" (Madeleine: normalize(E(q) + E_θ(q)), two passes) or "adapted" (E_θ(q) alone,
    one pass of the merged network); adapters written before the option are summed."""
    return str(manifest.training.hyperparameters.get("query_form", "summed"))


class AdapterManifest(BaseModel):
    format: int = FORMAT
    name: str
    backbone: Backbone
    training: TrainingRecord
    metrics: dict[str, Any] = Field(default_factory=dict)
    strength: float = Field(1.0, ge=0, le=2, description="the LoRA scale it is served at unless "
                            "DCPM_ADAPTER_STRENGTH says otherwise (chosen on LoCoMo and the held-out set)")
    created_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))


def backbone_of(embedder: AdaptableEmbedder) -> Backbone:
    return Backbone(name=embedder.name, fingerprint=embedder.fingerprint(),
                    pooling=embedder.pooling, query_instruction=embedder.query_instruction)


def read_manifest(directory: Path) -> AdapterManifest:
    path = Path(directory) / MANIFEST_FILE
    if not path.is_file():
        raise Invalid(f"{directory} is not a dcpm adapter: {MANIFEST_FILE} is missing "
                      "(train one with `dcpm adapter train`)")
    try:
        return AdapterManifest.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as exc:
        raise Invalid(f"bad adapter manifest {path}: {exc}") from None


def write_manifest(directory: Path, manifest: AdapterManifest) -> Path:
    path = Path(directory) / MANIFEST_FILE
    path.write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return path


def mismatch(manifest: AdapterManifest, embedder: AdaptableEmbedder) -> str | None:
    """Why the adapter cannot serve on this embedder, or None when it can."""
    have, need = backbone_of(embedder), manifest.backbone
    if not same_weights(need.fingerprint, have.fingerprint):
        return (f"adapter {manifest.name!r} was trained for backbone {need.name} (weights {need.fingerprint}), "
                f"but the embedder is {have.name} (weights {have.fingerprint})")
    if have.pooling != need.pooling or have.query_instruction != need.query_instruction:
        return (f"adapter {manifest.name!r} was trained with pooling={need.pooling!r} and query instruction "
                f"{need.query_instruction!r}, but the embedder uses pooling={have.pooling!r} and "
                f"{have.query_instruction!r}")
    return None


def check_backbone(manifest: AdapterManifest, embedder: AdaptableEmbedder) -> None:
    problem = mismatch(manifest, embedder)
    if problem:
        raise Invalid(f"{problem}. Memories are encoded by the embedder, so an adapter only works on the "
                      "backbone it was trained for: retrain it with `dcpm adapter train` for this embedder, "
                      "or set DCPM_QUERY_ADAPTER=none.")
