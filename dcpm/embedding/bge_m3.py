"""Production embedder: bge-m3 through BGEM3FlagModel, dense vectors plus its lexical weights."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from dcpm.config import Settings
from dcpm.embedding.base import Encoded, SparseVector
from dcpm.embedding.device import resolve_device
from dcpm.embedding.fingerprint import weights_fingerprint
from dcpm.embedding.threads import for_batch
from dcpm.errors import Unavailable


class BgeM3Embedder:
    # Lexical weights are already learned term importances: no IDF on top.
    sparse_uses_idf = False
    dim = 1024

    def __init__(self, settings: Settings):
        from FlagEmbedding import BGEM3FlagModel

        self.device = resolve_device(settings.embedder_device)
        try:
            self._model = BGEM3FlagModel(settings.embedder, use_fp16=self.device == "cuda", devices=self.device)
        except OSError as exc:
            raise Unavailable(f"cannot load embedder {settings.embedder!r}: {exc}") from exc
        self.name = settings.embedder
        self.batch_size = settings.embed_batch_size
        self._fingerprint = weights_fingerprint(settings.embedder, settings.embedder)

    def fingerprint(self) -> str:
        return self._fingerprint

    def _encode(self, texts: Sequence[str]) -> Encoded:
        with for_batch(len(texts)):
            out = self._model.encode(list(texts), batch_size=self.batch_size, return_dense=True, return_sparse=True)
        sparse = [
            SparseVector(indices=[int(token) for token in weights], values=[float(v) for v in weights.values()])
            for weights in out["lexical_weights"]
        ]
        return Encoded(dense=np.asarray(out["dense_vecs"], dtype=np.float32), sparse=sparse)

    encode_documents = _encode
    encode_queries = _encode
