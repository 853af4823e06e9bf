"""BM25 term weights from Qdrant's own edge-side BM25 model; the index applies IDF."""

from __future__ import annotations

from typing import Sequence

from qdrant_edge import Bm25, Bm25Config

from dcpm.embedding.base import SparseVector


class Bm25Terms:
    def __init__(self, language: str = "english"):
        self._model = Bm25(Bm25Config(language=language))

    def documents(self, texts: Sequence[str]) -> list[SparseVector]:
        return [_plain(self._model.embed_document(text)) for text in texts]

    def queries(self, texts: Sequence[str]) -> list[SparseVector]:
        return [_plain(self._model.embed_query(text)) for text in texts]


def _plain(vector) -> SparseVector:  # type: ignore[no-untyped-def]
    return SparseVector(indices=list(vector.indices), values=list(vector.values))
