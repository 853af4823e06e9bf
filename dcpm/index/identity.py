"""What a vector index was built for: the embedder's dimension, whether its sparse weights take
IDF, and which weights made its vectors.

Two models of one dimension (all-MiniLM-L6-v2 and bge-small-en, both 384) make vectors that fit
the same index and mean nothing to each other: searching one with the other's queries returns
noise with no error. So each backend records the embedder's weights fingerprint beside the
dimension, refuses to serve another embedder, and lets only `dcpm reindex` replace such an index
(the relational store holds every text, so nothing is lost). An index recorded before the
fingerprint was kept is judged by dimension and IDF flag, and gets the fingerprint written; one
recorded in the fingerprint's first form is judged by that form and gets the full one
(`dcpm.embedding.fingerprint`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dcpm.embedding.fingerprint import same_weights
from dcpm.errors import Conflict


@dataclass(frozen=True)
class IndexIdentity:
    dim: int
    sparse_idf: bool
    embedder: str | None = None  # the weights fingerprint; None: not known to the caller (tools, benches)

    def record(self) -> dict[str, Any]:
        return {"dim": self.dim, "sparse_idf": self.sparse_idf, "embedder": self.embedder}

    def serves(self, found: Mapping[str, Any]) -> bool:
        """Whether an index recorded as `found` holds vectors of this embedder."""
        if found.get("dim") != self.dim or found.get("sparse_idf") != self.sparse_idf:
            return False
        recorded = found.get("embedder")
        return recorded is None or self.embedder is None or same_weights(recorded, self.embedder)

    def settle(self, where: str, found: Mapping[str, Any] | None, replace: bool) -> str:
        """What opening an index recorded as `found` (None: a new one) must do, the one decision
        every backend takes: "keep" it; "record" this embedder in it (new, from before the
        fingerprint was kept, or kept in its first form); "replace" it (another embedder's, and
        the caller is `reindex`). Another embedder's index, otherwise, is refused."""
        if found is None:
            return "record"
        if not self.serves(found):
            if not replace:
                raise self.refusal(where, found)
            return "replace"
        return "record" if self.embedder is not None and found.get("embedder") != self.embedder else "keep"

    def refusal(self, where: str, found: Mapping[str, Any]) -> Conflict:
        return Conflict(f"{where} was built for another embedder ({_describe(found)}; this one is "
                        f"{_describe(self.record())}); run `dcpm reindex` to rebuild it from the relational "
                        "store with this embedder, or set the embedder it was built with")


def read_record(path: Path, where: str, replace: bool) -> dict[str, Any]:
    """The record at `path` (an index's vectors.json), written whole by its backend. One no JSON
    object reads from (emptied, edited, another program's) says nothing of the vectors: it is
    refused as another embedder's index is, and `reindex` (`replace`) rebuilds the index."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        found = None
    if isinstance(found, dict):
        return found
    if replace:
        return {}  # records no embedder: IndexIdentity.settle replaces the index
    raise Conflict(f"{path} is damaged (not the record dcpm writes of what built {where}); run `dcpm reindex` "
                   "to rebuild the index from the relational store")


def _describe(layout: Mapping[str, Any]) -> str:
    words = [f"dim {layout.get('dim')}", f"sparse idf {layout.get('sparse_idf')}"]
    if layout.get("embedder"):
        words.append(f"weights {layout['embedder']}")
    return ", ".join(words)
