"""Embedders behind one interface (DCPM 2.4: dense vectors for ANN, sparse BM25 vectors for
lexical recall): all-MiniLM-L6-v2 through FlagEmbedding by default (`flag_dense`), bge-m3 with
its lexical weights (`bge_m3`), the tokenizer-based BM25 terms (`bm25`), and the device rule."""

from __future__ import annotations

from dcpm.config import Settings
from dcpm.embedding import threads
from dcpm.embedding.base import Embedder, Encoded, SparseVector

__all__ = ["Embedder", "Encoded", "SparseVector", "load_embedder"]


def load_embedder(settings: Settings) -> Embedder:
    """Choose the implementation by name: bge-m3 gets its own lexical weights, others BM25."""
    threads.configure(settings.query_threads, settings.document_threads)
    if "bge-m3" in settings.embedder.lower():
        from dcpm.embedding.bge_m3 import BgeM3Embedder

        return BgeM3Embedder(settings)
    from dcpm.embedding.flag_dense import FlagDenseEmbedder

    return FlagDenseEmbedder(settings)

