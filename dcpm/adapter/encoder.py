"""The associative query encoder (Madeleine 4.5): one query vector normalize(E(q) + E_θ(q)),
or E_θ(q) alone for an adapter trained in the "adapted" form (one pass instead of two).

Because every vector has unit norm, <E(q) + E_θ(q), E(m)> is the trained summed score, so the
host's index, sparse retriever and fusion stay exactly as they are; only the query changes.
With `adapter_fusion = "rrf"` it is a lane of its own instead, beside the frozen E(q), which the
same forward pass computes (dcpm.read.lanes).
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dcpm.adapter import SHIPPED_ADAPTER
from dcpm.adapter.manifest import MANIFEST_FILE, check_backbone, mismatch, query_form, read_manifest
from dcpm.config import Settings
from dcpm.embedding.base import AdaptableEmbedder, Embedder
from dcpm.errors import Invalid
from dcpm.read.query import QueryVector

log = logging.getLogger("dcpm.adapter")
DISABLED = ("", "none", "off", "false")


def associative_vectors(embedder: AdaptableEmbedder, adapted_model: Any, texts: Sequence[str],
                        form: str = "summed") -> np.ndarray:
    """The served associative query vectors for a batch, with the embedder's own query instruction."""
    if form == "adapted":  # one pass: the frozen E(q) is not part of the vector
        return embedder.dense([embedder.query_instruction + text for text in texts], adapted_model)
    return frozen_and_associative(embedder, adapted_model, texts)[1]


def frozen_and_associative(embedder: AdaptableEmbedder, adapted_model: Any, texts: Sequence[str],
                           form: str = "summed") -> tuple[np.ndarray, np.ndarray]:
    """E(q) and the associative vector for a batch, from one tokenization."""
    frozen, adapted = embedder.dense_each([embedder.query_instruction + text for text in texts],
                                          [embedder.model, adapted_model])
    if form == "adapted":
        return frozen, adapted
    summed = frozen + adapted
    return frozen, summed / np.linalg.norm(summed, axis=1, keepdims=True).clip(min=1e-12)


# Loaded E_θ per frozen model: services built on one embedder (tests, several data dirs in one
# process) share it instead of copying the weights again. Read-only once loaded.
_LOADED: weakref.WeakKeyDictionary[Any, dict[tuple[Path, float, bool, float], Any]] = weakref.WeakKeyDictionary()
_LOADING = threading.Lock()  # two services starting at once load the weights once


def _adapted_model(model: Any, directory: Path, merge: bool, strength: float) -> Any:
    from dcpm.adapter.lora import load_lora

    weights = directory / "adapter_model.safetensors"
    key = (directory, weights.stat().st_mtime if weights.exists() else 0.0, merge, strength)
    with _LOADING:
        loaded = _LOADED.setdefault(model, {})
        if key not in loaded:
            loaded[key] = load_lora(model, directory, merge=merge, strength=strength)
        return loaded[key]


class AssociativeQueryEncoder:
    """A `dcpm.read.query.QueryEncoder`: memories and the index stay E(m); the sparse half is untouched."""

    def __init__(self, embedder: AdaptableEmbedder, directory: Path, merge: bool = True, fusion: str = "replace",
                 strength: float | None = None):
        self.manifest = read_manifest(directory)
        check_backbone(self.manifest, embedder)
        self.embedder = embedder
        self.directory = Path(directory)
        self.merged = merge
        self.form = query_form(self.manifest)
        self.lane = fusion in ("rrf", "rrf_hybrid")  # a lane of its own: dcpm.read.lanes
        self.strength = self.manifest.strength if strength is None else strength
        self.adapted = _adapted_model(embedder.model, self.directory.resolve(), merge, self.strength)
        self.name = f"associative:{self.manifest.name}:{embedder.name}" + (f":{fusion}" if self.lane else "")

    def encode_query(self, text: str) -> QueryVector:
        """"replace": the associative vector is the dense query; with a lane, E(q) is, beside it."""
        sparse = self.embedder.sparse_queries([text])[0]
        if self.lane:
            frozen, associative = frozen_and_associative(self.embedder, self.adapted, [text], self.form)
            return QueryVector(frozen[0], sparse, self.name, associative=associative[0])
        return QueryVector(self.dense_queries([text])[0], sparse, self.name)

    def dense_queries(self, texts: Sequence[str]) -> np.ndarray:
        return associative_vectors(self.embedder, self.adapted, texts, self.form)


def adapter_directory(setting: str) -> Path | None:
    """The adapter a `query_adapter` setting names: None when disabled, the shipped one for "default"."""
    if setting.strip().lower() in DISABLED:
        return None
    if setting.strip().lower() == "default":
        return SHIPPED_ADAPTER
    directory = Path(setting).expanduser()
    if not directory.is_dir():
        raise Invalid(f"query adapter {setting!r} is not a directory (DCPM_QUERY_ADAPTER); "
                      "use a directory written by `dcpm adapter train`, 'default' or 'none'")
    return directory


def load_query_encoder(settings: Settings, embedder: Embedder) -> AssociativeQueryEncoder | None:
    """The configured associative encoder, or None for the frozen one.

    An adapter named explicitly must fit the embedder (a clear error otherwise); the shipped
    default only applies to the backbone it was trained for and quietly steps aside for others.
    """
    directory = adapter_directory(settings.query_adapter)
    if directory is None:
        return None
    shipped = directory == SHIPPED_ADAPTER
    if shipped:
        if not (directory / MANIFEST_FILE).is_file():
            log.warning("the shipped associative adapter is missing from %s; using the frozen encoder", directory)
            return None
        if not isinstance(embedder, AdaptableEmbedder):
            log.info("no associative adapter: embedder %s exposes no network to adapt", embedder.name)
            return None
        problem = mismatch(read_manifest(directory), embedder)
        if problem:
            log.info("shipped associative adapter not used: %s", problem)
            return None
    elif not isinstance(embedder, AdaptableEmbedder):
        raise Invalid(f"embedder {embedder.name} cannot take a query adapter (no network to adapt)")
    encoder = AssociativeQueryEncoder(embedder, directory, merge=settings.adapter_merge, fusion=settings.adapter_fusion,
                                      strength=settings.adapter_strength)
    log.info("query encoder: %s (%s, %s)", encoder.name, "merged" if encoder.merged else "unmerged",
             settings.adapter_fusion)
    return encoder
