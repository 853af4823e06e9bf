"""Two-stage DBSCAN (DCPM 2.3, phase 1): a first pass over all fresh items, then a tighter pass
inside clusters too large to be one regularity.

Memory stays bounded at any number of facts: similarities are computed one block of rows at a
time and only per-row state (core flag, component, nearest core) is kept. scikit-learn's DBSCAN
does not fit here: it keeps every row's whole neighbourhood (quadratic for the dense topic
clusters one user's facts form) and its brute-force radius search fills up to its 1 GB working
memory with one distance block (a dense 10k x 10k matrix: 1.3 GB peak at 10k facts)."""

from __future__ import annotations

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

BLOCK_BYTES = 16 * 2**20  # one block of float32 similarities (rows x N)


def dbscan_cosine(vectors: np.ndarray, eps: float, min_samples: int) -> np.ndarray:
    """Labels per row (-1 = noise), the clusters numbered by their first core row as
    scikit-learn numbers them. A row is core with at least `min_samples` rows (itself included)
    within cosine distance `eps`; clusters are the connected groups of core rows, and a border
    row joins the cluster of its nearest core row (scikit-learn's choice depends on visit order).

    One pass over blocks of rows: a block's rows are compared with every row, which settles
    their core flags; each edge between two core rows is joined when the later of the two is
    processed, and a border row meets every core row either in its own block or in theirs."""
    n = len(vectors)
    if n < min_samples:
        return np.full(n, -1)
    rows = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    if not np.allclose(norms, 1.0, atol=1e-4):  # stored vectors are unit length already: no N x dim copy
        rows = rows / np.maximum(norms, np.float32(1e-12))
    threshold = np.float32(1.0 - eps)  # cosine distance <= eps  <=>  dot product >= 1 - eps
    core = np.zeros(n, dtype=bool)
    component = np.arange(n)  # for core rows: the first row of their component
    nearest_core = np.full(n, -1)
    nearest_sim = np.full(n, -np.inf, dtype=np.float32)
    step = max(1, BLOCK_BYTES // (4 * n))
    for start in range(0, n, step):
        end = min(n, start + step)
        sims = rows[start:end] @ rows.T
        near = sims >= threshold
        core[start:end] = near.sum(axis=1) >= min_samples
        block_core = core[start:end]
        known_core = core[:end]  # rows past this block are not settled yet; they join when their turn comes
        edges = np.nonzero(near[block_core, :end] & known_core)
        _join(component, np.flatnonzero(block_core)[edges[0]] + start, edges[1])
        # Border rows of this block: their nearest core row among those settled so far.
        border = np.flatnonzero(~block_core)
        if len(border):
            reach = np.where(near[border, :end] & known_core, sims[border, :end], -np.inf)
            _closer(nearest_core, nearest_sim, border + start, reach.argmax(axis=1), reach.max(axis=1))
        # Border rows of earlier blocks: the core rows of this block may be nearer to them.
        earlier = np.flatnonzero(~core[:start])
        if len(earlier) and block_core.any():
            core_rows = np.flatnonzero(block_core)
            reach = np.where(near[np.ix_(core_rows, earlier)], sims[np.ix_(core_rows, earlier)], -np.inf)
            _closer(nearest_core, nearest_sim, earlier, core_rows[reach.argmax(axis=0)] + start, reach.max(axis=0))
    return _labels(core, component, nearest_core)


def _join(component: np.ndarray, left: np.ndarray, right: np.ndarray) -> None:
    """Merge the components that edges left[i]-right[i] connect; each component stays labelled
    by its first row, so `component` is flat (every entry a first row) after every call."""
    a, b = component[left], component[right]
    differ = a != b
    if not differ.any():
        return
    a, b = a[differ], b[differ]
    roots = np.unique(np.concatenate([a, b]))
    ia, ib = np.searchsorted(roots, a), np.searchsorted(roots, b)
    graph = coo_matrix((np.ones(len(ia), dtype=np.int8), (ia, ib)), shape=(len(roots), len(roots)))
    count, merged = connected_components(graph, directed=False)
    first = np.full(count, len(component))
    np.minimum.at(first, merged, roots)
    remap = np.arange(len(component))
    remap[roots] = first[merged]
    component[:] = remap[component]


def _closer(nearest: np.ndarray, best: np.ndarray, rows: np.ndarray, cores: np.ndarray, sims: np.ndarray) -> None:
    better = sims > best[rows]
    nearest[rows[better]] = cores[better]
    best[rows[better]] = sims[better]


def _labels(core: np.ndarray, component: np.ndarray, nearest_core: np.ndarray) -> np.ndarray:
    labels = np.full(len(core), -1)
    firsts = np.unique(component[core])
    labels[core] = np.searchsorted(firsts, component[core])
    border = ~core & (nearest_core >= 0)
    labels[border] = np.searchsorted(firsts, component[nearest_core[border]])
    return labels


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
