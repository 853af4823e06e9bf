"""The embedder interface every implementation provides."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Sequence, runtime_checkable

if TYPE_CHECKING:  # annotations only: numpy loads with the model, not with every CLI command
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


@runtime_checkable
class AdaptableEmbedder(Embedder, Protocol):
    """An embedder whose query side a LoRA can adapt (Madeleine): it exposes its network, its
    tokenizer and pooling, and encodes one batch through several networks in one tokenization."""

    model: Any  # the torch module of E
    tokenizer: Any
    pooling: str
    query_instruction: str

    def dense(self, texts: list[str], model: Any = None) -> np.ndarray: ...

    def dense_each(self, texts: Sequence[str], models: Sequence[Any]) -> list[np.ndarray]: ...

    def dense_queries(self, texts: Sequence[str]) -> np.ndarray: ...
