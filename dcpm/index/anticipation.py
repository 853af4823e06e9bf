"""Anticipations (T-Mem, paper 001): situations in which a memory should come back, written by
the extraction LLM when the item is stored and searched beside the item's own text.

"Audrey's lease allows three dogs; she has four" shares no words and little meaning with "we're
looking at houses to rent this summer"; an anticipation such as "Audrey starts looking for a new
place to rent" does. On conversations written by someone else, ranked among memories that all
have anticipations, cue Recall@10 went from 0.450 to 0.625 and indirect questions from 0.275 to
0.750 through the service (scripts/eval_anticipation_service.py; scripts/heldout/README.md).

Every backend gets them the same way, without a change to its layout: an item's anticipations,
joined into one text, are a *companion point* beside the item's own point, with that text's
dense vector and its lexical terms.
- Its id is the item's id with the UUID version nibble flipped (4 -> 8, 5 -> 9): reversible, and
  no memory id has version 8 or 9 (a restore refuses one), so it can never name another memory.
- Its payload is the item's, under the user id `<user>#anticipations`: no user id can contain
  "#" (dcpm.domain.USER_ID), so no ordinary search, count or BM25 statistic of any user sees it,
  and only `query(ANTICIPATION | ANTICIPATION_TERMS, ...)` of the owner reaches it.
`AnticipatingIndex` wraps the backend so that nothing above the index knows companions exist:
deleting a point deletes its companion, a validity payload reaches both, and hits come back
under the item's id. Deleting means gone everywhere holds with no delete site changed.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from dcpm.domain import MEMORY_ID_VERSIONS, ItemKind
from dcpm.embedding.base import SparseVector
from dcpm.index.base import DENSE, SPARSE, Hit, IndexPoint, PendingPurge, Scope, VectorIndex

if TYPE_CHECKING:
    import numpy as np

    from dcpm.embedding import Embedder
    from dcpm.store.models import Item

ANTICIPATION = "anticipation"  # the `using` of a query over the owner's anticipations
ANTICIPATION_TERMS = "anticipation_terms"  # the same over their lexical terms
OWNER_SUFFIX = "#anticipations"
_VERSION_FLIP = 0xC  # the UUID version nibble: 4 <-> 8, 5 <-> 9
_FLIP = _VERSION_FLIP << 76
_COMPANION_VERSIONS = tuple(version ^ _VERSION_FLIP for version in MEMORY_ID_VERSIONS)
_NO_TERMS = SparseVector([], [])
EXTRACTED = (ItemKind.FACT, ItemKind.IDENTITY)  # the kinds extraction writes, and so anticipates


def companion_id(point_id: str) -> str:
    return str(uuid.UUID(int=uuid.UUID(point_id).int ^ _FLIP))


def owner_of(point_id: str) -> str | None:
    """The item whose companion this point is; None for an ordinary point."""
    value = uuid.UUID(point_id)
    return str(uuid.UUID(int=value.int ^ _FLIP)) if value.version in _COMPANION_VERSIONS else None


def companion_user(user_id: str) -> str:
    return user_id + OWNER_SUFFIX


def with_anticipations(embedder: Embedder, points: Sequence[IndexPoint], items: Sequence[Item]) -> list[IndexPoint]:
    """`points` with the anticipation vector of each item of `items` that has anticipations:
    all of an item's, embedded as one text (one vector kept nearly all of the gain of one each,
    with a third of the intrusion into unrelated questions: scripts/eval_anticipation.py)."""
    joined = {item.id: " ".join(item.anticipation_list) for item in items if item.anticipations}
    if not joined:
        return list(points)
    encoded = embedder.encode_documents(list(joined.values()))
    vectors = {item_id: (encoded.dense[n], encoded.sparse[n]) for n, item_id in enumerate(joined)}
    return [replace(p, anticipation=vectors[p.id][0], anticipation_terms=vectors[p.id][1]) if p.id in vectors else p
            for p in points]


def expected_companions(rows: Sequence[Any]) -> list[str]:
    """The companion point ids that these rows' points should have beside them."""
    return [companion_id(row.id) for row in rows if getattr(row, "anticipations", None)]


class AnticipatingIndex:
    """A `VectorIndex` whose points may carry an anticipation vector (see the module)."""

    def __init__(self, inner: VectorIndex):
        self.inner = inner

    def __getattr__(self, name: str) -> Any:  # backend, sparse_uses_idf, a backend's own attributes
        return getattr(self.inner, name)

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        companions = [IndexPoint(companion_id(p.id), p.anticipation, p.anticipation_terms or _NO_TERMS,
                                 {**p.payload, "user_id": companion_user(p.payload["user_id"])})
                      for p in points if p.anticipation is not None]
        self.inner.upsert([replace(p, anticipation=None, anticipation_terms=None) if p.anticipation is not None
                           else p for p in points]
                          + companions)
        # An item whose anticipations were dropped (a manual edit) loses its companion
        bare = [companion_id(p.id) for p in points if p.anticipation is None and p.payload.get("kind") in EXTRACTED]
        stale = self.inner.existing(bare) if bare else set()
        if stale:
            self.inner.delete(sorted(stale))

    def delete(self, ids: Sequence[str]) -> None:
        self.inner.delete([*ids, *(companion_id(i) for i in ids if owner_of(i) is None)])

    def set_payload(self, ids: Sequence[str], payload: dict[str, Any]) -> None:
        self.inner.set_payload(ids, payload)
        companions = self.inner.existing([companion_id(i) for i in ids]) if "user_id" not in payload else set()
        if companions:  # validity: a companion holds while its item does
            self.inner.set_payload(sorted(companions), payload)

    def query(self, using: str, vector: np.ndarray | SparseVector, scope: Scope, limit: int) -> list[Hit]:
        if using not in (ANTICIPATION, ANTICIPATION_TERMS):
            return self.inner.query(using, vector, scope, limit)
        hits = self.inner.query(DENSE if using == ANTICIPATION else SPARSE, vector,
                                replace(scope, user_id=companion_user(scope.user_id)), limit)
        return [Hit(owner, h.score) for h in hits if (owner := owner_of(h.id)) is not None]

    def dense_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        return self.inner.dense_vectors(ids)

    def dense_scores(self, vector: np.ndarray, ids: Sequence[str]) -> dict[str, float]:
        return self.inner.dense_scores(vector, ids)

    def existing(self, ids: Sequence[str]) -> set[str]:
        return self.inner.existing(ids)

    def ids(self) -> Iterator[str]:
        """Every point's id, a companion under its item's (reindex removes the points of rows
        that are gone, and so the companions of items that are)."""
        for point_id in self.inner.ids():
            yield owner_of(point_id) or point_id

    def count(self, user_id: str | None = None) -> int:
        return self.inner.count(user_id)

    def optimize(self) -> bool:
        return self.inner.optimize()

    def clear(self) -> None:
        self.inner.clear()

    def compact(self) -> bool:
        return self.inner.compact()

    def pending_purge(self) -> PendingPurge | None:
        return self.inner.pending_purge()

    def close(self) -> None:
        self.inner.close()
