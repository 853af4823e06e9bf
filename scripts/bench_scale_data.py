"""Synthetic memories for the scale benchmark: SYNTHETIC vectors, no embedder, so that the cost of
embedding does not hide the cost of the index.

Dense vectors are clustered random unit vectors of the embedder's dimension: every user writes
about a handful of topics (shared topic centres, like people sharing interests), each memory is
its topic's centre plus Gaussian noise, normalised. The noise is set so that two memories of one
topic sit at cosine 0.55-0.75, about where sentence embeddings of one subject sit. Sparse vectors
draw ~12 terms from a Zipfian vocabulary (s = 1.07) whose 50 most frequent words are left out, as
BM25 leaves out stop words; a term's weight is its count, as a BM25 encoder gives it before IDF.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from dcpm.embedding.base import SparseVector
from dcpm.index import IndexPoint
from dcpm.index.base import METADATA, OPEN_END

DIM = 384  # all-MiniLM-L6-v2, the default embedder
TOPICS = 512  # shared topic centres
TOPICS_PER_USER = 12
VOCAB = 30_000
STOP_WORDS = 50  # most frequent ranks dropped, as BM25 drops stop words
TERMS_PER_MEMORY = 12
TERMS_PER_QUERY = 4
ZIPF_S = 1.07
CHUNK = 100  # memories one user writes in a row; chunks of all users are interleaved
TOPIC_PART, QUERY_PART, TERM_PART = 2**40, 2**40 + 1, 2**41  # random streams apart from the memories' parts
SMALL, BIG = "user-small", "user-big"


@dataclass(frozen=True)
class Layout:
    """Who holds how many memories: one big user, one small user, the rest spread evenly."""

    memories: int
    users: int
    big_user: int
    small_user: int

    def __post_init__(self) -> None:
        if self.users < 3 or self.big_user + self.small_user >= self.memories:
            raise SystemExit("need at least 3 users and more memories than the big and small users hold")

    def user_ids(self) -> list[str]:
        return [SMALL, BIG] + [f"user-{n:05d}" for n in range(self.users - 2)]

    def sizes(self) -> dict[str, int]:
        others = self.user_ids()[2:]
        share, extra = divmod(self.memories - self.big_user - self.small_user, len(others))
        sizes = {SMALL: self.small_user, BIG: self.big_user}
        sizes.update({u: share + (1 if n < extra else 0) for n, u in enumerate(others)})
        return sizes


class Corpus:
    """Deterministic points per (user, chunk): any part can be generated again without the rest."""

    def __init__(self, seed: int, dim: int = DIM):
        self.seed, self.dim = seed, dim
        rng = np.random.default_rng(seed)
        self.centres = _unit(rng.normal(size=(TOPICS, dim)))
        ranks = np.arange(STOP_WORDS + 1, VOCAB + 1, dtype=np.float64)
        self.term_p = ranks ** -ZIPF_S / (ranks ** -ZIPF_S).sum()
        self.terms = np.arange(STOP_WORDS, VOCAB)

    def _rng(self, user_id: str, part: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, uuid.uuid5(uuid.NAMESPACE_OID, user_id).int % 2**63, part])

    def topics(self, user_id: str) -> tuple[np.ndarray, np.ndarray]:
        """The user's topic centres and the noise of each (per dimension)."""
        rng = self._rng(user_id, TOPIC_PART)
        chosen = rng.choice(TOPICS, TOPICS_PER_USER, replace=False)
        return self.centres[chosen], rng.uniform(0.030, 0.045, TOPICS_PER_USER) / np.sqrt(self.dim / 384)

    def dense(self, user_id: str, part: int, count: int) -> np.ndarray:
        centres, noise = self.topics(user_id)
        rng = self._rng(user_id, part)
        topic = rng.integers(0, len(centres), count)
        return _unit(centres[topic] + rng.normal(size=(count, self.dim)) * noise[topic, None])

    def sparse(self, rng: np.random.Generator, count: int, terms: int) -> list[SparseVector]:
        drawn = rng.choice(self.terms, size=(count, terms), p=self.term_p)
        vectors = []
        for row in drawn:
            ids, counts = np.unique(row, return_counts=True)
            vectors.append(SparseVector(ids.tolist(), counts.astype(float).tolist()))
        return vectors

    def points(self, user_id: str, part: int, count: int) -> list[IndexPoint]:
        """Memories part*CHUNK .. part*CHUNK+count-1 of the user: two turns for every fact."""
        dense = self.dense(user_id, part, count)
        sparse = self.sparse(self._rng(user_id, TERM_PART + part), count, TERMS_PER_MEMORY)
        points = []
        for n in range(count):
            number = part * CHUNK + n
            payload = {"user_id": user_id, "kind": "fact" if number % 3 == 2 else "raw",
                       "session_id": f"s{number // 50}", "valid_from": 1.7e9 + number * 60.0, "valid_to": OPEN_END,
                       METADATA: {}}
            points.append(IndexPoint(point_id(user_id, number), dense[n], sparse[n], payload))
        return points

    def queries(self, user_id: str, count: int) -> list[tuple[np.ndarray, SparseVector]]:
        """Questions about the user's own topics: a centre with a memory's noise, and 4 terms."""
        dense = self.dense(user_id, QUERY_PART, count)
        return list(zip(dense, self.sparse(self._rng(user_id, TERM_PART - 1), count, TERMS_PER_QUERY)))


def point_id(user_id: str, number: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{user_id}/{number}"))


def schedule(sizes: dict[str, int], seed: int) -> list[tuple[str, int, int]]:
    """(user, part, count) chunks of every user's memories, shuffled so that users interleave as
    they would in a running deployment."""
    chunks = [(user_id, part, min(CHUNK, size - part * CHUNK))
              for user_id, size in sizes.items() for part in range(-(-size // CHUNK))]
    np.random.default_rng(seed).shuffle(chunks)
    return chunks


def split_at(chunks: list[tuple[str, int, int]], total: int) -> tuple[list, list]:
    """The first stage (every chunk of the small user, then other users' chunks, never the big
    user's, until `total` memories) and the rest, both in schedule order."""
    first = [c for c in chunks if c[0] == SMALL]
    held = sum(c[2] for c in first)
    for chunk in chunks:
        if held >= total:
            break
        if chunk[0] not in (SMALL, BIG):
            first.append(chunk)
            held += chunk[2]
    taken = set(first)
    return first, [c for c in chunks if c not in taken]


def batches(corpus: Corpus, chunks: list[tuple[str, int, int]], batch: int) -> Iterator[list[IndexPoint]]:
    """Upsert batches of about `batch` points assembled from consecutive chunks."""
    pending: list[IndexPoint] = []
    for user_id, part, count in chunks:
        pending += corpus.points(user_id, part, count)
        if len(pending) >= batch:
            yield pending
            pending = []
    if pending:
        yield pending


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
