"""Two-stage DBSCAN (DCPM 2.3, phase 1): a first pass over all fresh items, then a tighter pass
inside clusters too large to be one regularity."""

from __future__ import annotations

import numpy as np
from sklearn.cluster import DBSCAN


def dbscan_cosine(vectors: np.ndarray, eps: float, min_samples: int) -> np.ndarray:
    """Labels per row (-1 = noise). Rows are L2-normalized, so cosine distance is computed as
    1 - dot product in chunks by scikit-learn's precomputed-free brute force."""
    if len(vectors) < min_samples:
        return np.full(len(vectors), -1)
    return DBSCAN(eps=eps, min_samples=min_samples, metric="cosine", algorithm="brute", n_jobs=1).fit_predict(vectors)


def two_stage_dbscan(vectors: np.ndarray, eps_initial: float, eps_refine: float, min_samples: int,
                     max_cluster_size: int) -> list[list[int]]:
    """Clusters as lists of row indices, largest first; noise is left out."""
    clusters: list[list[int]] = []
    labels = dbscan_cosine(vectors, eps_initial, min_samples)
    for label in sorted(set(labels) - {-1}):
        members = np.flatnonzero(labels == label)
        if len(members) <= max_cluster_size:
            clusters.append(members.tolist())
            continue
        inner = dbscan_cosine(vectors[members], eps_refine, min_samples)
        split = [members[inner == sub].tolist() for sub in sorted(set(inner) - {-1})]
        # A refine pass that finds no structure keeps the big cluster rather than losing it.
        clusters.extend(split or [members.tolist()])
    return sorted(clusters, key=len, reverse=True)


def centroid(vectors: np.ndarray) -> np.ndarray:
    mean = vectors.mean(axis=0)
    norm = np.linalg.norm(mean)
    return (mean / norm).astype(np.float32) if norm else mean.astype(np.float32)
