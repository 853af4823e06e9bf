"""Query encoders of the read path (DCPM 2.4 step 1): the frozen embedder E, and the interface
the associative adapter (Madeleine, dcpm.adapter) plugs into. Memories never change; only the
query vector does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from dcpm.embedding import Embedder, SparseVector

if TYPE_CHECKING:  # annotations only: numpy loads with the model, not with every CLI command
    import numpy as np


@dataclass(frozen=True)
class QueryVector:
    """`dense` enters the hybrid score; `associative`, when set, is a second dense query whose
    ranking is fused with the hybrid one by rank (dcpm.read.lanes), `dense` then being E(q)."""

    dense: np.ndarray
    sparse: SparseVector
    encoder: str
    associative: np.ndarray | None = None


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
