"""Phase 1 clusters one block of rows at a time (bounded memory); whatever the block size, the
clusters are those DBSCAN defines over all rows at once."""

import numpy as np
import pytest
from sklearn.cluster import DBSCAN

from dcpm.consolidation import clustering
from dcpm.consolidation.clustering import dbscan_cosine, two_stage_dbscan


def unit(rows):
    rows = np.asarray(rows, dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def topics(seed: int, sizes: list[int], spread: float, strays: int, dim: int = 16) -> np.ndarray:
    """A user's facts: a few topics of varying size, plus strays that belong to none."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(len(sizes), dim))
    rows = [centres[t] + rng.normal(0, spread, size=(n, dim)) for t, n in enumerate(sizes)]
    return unit(np.vstack([*rows, rng.normal(size=(strays, dim))]))[rng.permutation(sum(sizes) + strays)]


@pytest.mark.parametrize("block_bytes", [64, 1000, 16 * 2**20])
def test_blocks_of_any_size_find_the_clusters_dbscan_defines(monkeypatch, block_bytes):
    monkeypatch.setattr(clustering, "BLOCK_BYTES", block_bytes)
    for seed in range(8):
        vectors = topics(seed, [40, 25, 12, 5], spread=0.25, strays=30)
        expected = DBSCAN(eps=0.35, min_samples=3, metric="cosine", algorithm="brute").fit(vectors)
        core = np.zeros(len(vectors), dtype=bool)
        core[expected.core_sample_indices_] = True
        found = dbscan_cosine(vectors, 0.35, 3)
        assert np.array_equal(found[core], expected.labels_[core])  # same clusters, numbered alike
        assert np.array_equal(found == -1, expected.labels_ == -1)  # the same facts left as noise


def test_a_fact_between_two_clusters_joins_the_nearer_one(monkeypatch):
    monkeypatch.setattr(clustering, "BLOCK_BYTES", 64)  # one row per block: the nearer cluster comes later
    # Two tight groups and, listed between them, one fact 18.4 degrees from the first group and 18.2
    # from the second: within reach (18.5) of one fact of each, so a border fact of both.
    angles = np.radians([0, 1, 2, 3, 21.4, 39.6, 41, 42, 43])
    vectors = unit(np.stack([np.cos(angles), np.sin(angles)], axis=1))
    labels = dbscan_cosine(vectors, eps=1 - np.cos(np.radians(18.5)), min_samples=4)
    assert labels[:4].tolist() == [0] * 4 and labels[5:].tolist() == [1] * 4
    assert labels[4] == 1


def test_two_stage_result_does_not_depend_on_the_block_size(monkeypatch):
    vectors = topics(3, [120, 60, 8], spread=0.2, strays=20)
    whole = two_stage_dbscan(vectors, 0.35, 0.25, 3, 40)
    monkeypatch.setattr(clustering, "BLOCK_BYTES", 256)
    assert two_stage_dbscan(vectors, 0.35, 0.25, 3, 40) == whole
    assert sum(map(len, whole)) >= 150  # the topics were found, not dismissed as noise
