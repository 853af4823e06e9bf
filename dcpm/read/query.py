"""Query encoders of the read path (DCPM 2.4 step 1): the frozen embedder E, and the interface
the associative adapter (Madeleine, dcpm.adapter) plugs into. Memories never change; only the
query vector does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from dcpm.embedding import Embedder, SparseVector


@dataclass(frozen=True)
class QueryVector:
    dense: np.ndarray
    sparse: SparseVector
    encoder: str


class QueryEncoder(Protocol):
    """Turns a query into vectors; the associative adapter plugs in here, memories never change."""

    def encode_query(self, text: str) -> QueryVector: ...


class FrozenQueryEncoder:
    name = "frozen"

    def __init__(self, embedder: Embedder):
        self.embedder = embedder

    def encode_query(self, text: str) -> QueryVector:
        encoded = self.embedder.encode_queries([text])
        return QueryVector(encoded.dense[0], encoded.sparse[0], f"{self.name}:{self.embedder.name}")
