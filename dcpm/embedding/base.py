"""The embedder interface every implementation provides."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np


@dataclass(frozen=True)
class SparseVector:
    indices: list[int]
    values: list[float]


@dataclass(frozen=True)
class Encoded:
    """Dense rows are L2-normalized float32; sparse[i] belongs to dense[i]."""

    dense: np.ndarray
    sparse: list[SparseVector]


class Embedder(Protocol):
    name: str
    dim: int
    device: str  # "cpu" or "cuda"
    # True when sparse values are term frequencies that the index should weight by IDF (BM25).
    sparse_uses_idf: bool

    def encode_documents(self, texts: Sequence[str]) -> Encoded: ...

    def encode_queries(self, texts: Sequence[str]) -> Encoded: ...

    def fingerprint(self) -> str:
        """Identifies the exact weights, so an index or adapter built for others is refused."""
        ...
