"""Consolidation phase 1 at scale: one user with N fresh facts whose vectors are SYNTHETIC
(bench_scale_data: a dozen topics, two facts of one topic at cosine 0.55-0.75). The rows go into
SQLite and the vectors into the embedded shard, as the writer leaves them; then `triage` (fresh
items, their stored vectors, two-stage DBSCAN, each cluster's graph context) runs in a fresh
process, so that its peak RSS is phase 1's own. The reference runs the previous clustering
(scikit-learn's DBSCAN, brute force) on the same vectors and checks the clusters are the same."""

from __future__ import annotations

import resource
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from bench_scale_data import CHUNK, DIM, Corpus

from dcpm.config import Settings
from dcpm.consolidation.clustering import two_stage_dbscan
from dcpm.consolidation.triage import triage
from dcpm.index import IndexPoint, open_index
from dcpm.index.projection import item_payload
from dcpm.store.db import Database
from dcpm.store.items import NewItem, add_item
from dcpm.write.raw import touch_user

USER = "fact-user"
ROWS_PER_TRANSACTION = 1000


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def load(workdir: Path, facts: int, seed: int) -> dict[str, Any]:
    """Write `facts` fact rows of one user and upsert their synthetic vectors."""
    settings = Settings(data_dir=workdir)
    db, index = Database(settings.sqlalchemy_url), open_index(settings, DIM, True)
    corpus = Corpus(seed)
    started = time.perf_counter()
    since = datetime(2025, 1, 1, tzinfo=timezone.utc)
    for first in range(0, facts, ROWS_PER_TRANSACTION):
        parts = range(first // CHUNK, -(-min(facts, first + ROWS_PER_TRANSACTION) // CHUNK))
        synthetic = [p for part in parts for p in corpus.points(USER, part, min(CHUNK, facts - part * CHUNK))]
        with db.session() as session:
            touch_user(session, USER)
            points = []
            for n, made in enumerate(synthetic):
                item = add_item(session, USER, NewItem("fact", f"synthetic fact {first + n}", topic="synthetic",
                                                        valid_from=since))
                points.append(IndexPoint(item.id, made.dense, made.sparse, item_payload(item)))
        index.upsert(points)
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    index.optimize()
    out = {"facts": facts, "load_s": loaded, "build_s": time.perf_counter() - started}
    index.close()
    db.close()
    return out


def phase1(workdir: Path) -> dict[str, Any]:
    """DCPM 2.3 phase 1 on what `load` wrote; time and this process's peak RSS."""
    settings = Settings(data_dir=workdir)
    db, index = Database(settings.sqlalchemy_url), open_index(settings, DIM, True)
    before = rss_mb()
    started = time.perf_counter()
    found = triage(db, index, settings, USER)
    seconds = time.perf_counter() - started
    out = {"method": "triage (blocked DBSCAN)", "facts": found.fresh_items, "seconds": seconds,
           "rss_before_mb": before, "peak_rss_mb": peak_mb(), "clusters": len(found.clusters),
           "noise": found.noise}
    index.close()
    db.close()
    return out


def facts_vectors(facts: int, seed: int) -> np.ndarray:
    corpus = Corpus(seed)
    return np.concatenate([corpus.dense(USER, part, min(CHUNK, facts - part * CHUNK))
                           for part in range(-(-facts // CHUNK))])


def sklearn_two_stage(vectors: np.ndarray, settings: Settings) -> list[list[int]]:
    """The clustering before it was blocked: scikit-learn's DBSCAN over all rows at once."""
    from sklearn.cluster import DBSCAN

    def labels(rows: np.ndarray, eps: float) -> np.ndarray:
        if len(rows) < settings.dbscan_min_samples:
            return np.full(len(rows), -1)
        return DBSCAN(eps=eps, min_samples=settings.dbscan_min_samples, metric="cosine",
                      algorithm="brute").fit_predict(rows)

    clusters: list[list[int]] = []
    first = labels(vectors, settings.dbscan_eps_initial)
    for label in sorted(set(first) - {-1}):
        members = np.flatnonzero(first == label)
        if len(members) <= settings.dbscan_max_cluster_size:
            clusters.append(members.tolist())
            continue
        inner = labels(vectors[members], settings.dbscan_eps_refine)
        clusters.extend([members[inner == s].tolist() for s in sorted(set(inner) - {-1})] or [members.tolist()])
    return sorted(clusters, key=len, reverse=True)


def reference(facts: int, seed: int, method: str) -> dict[str, Any]:
    """Clustering alone on the same vectors: `blocked` (dcpm's) or `sklearn` (the previous one,
    which also reports whether both give the same clusters)."""
    settings = Settings()
    vectors = facts_vectors(facts, seed)
    before = rss_mb()
    started = time.perf_counter()
    args = (settings.dbscan_eps_initial, settings.dbscan_eps_refine, settings.dbscan_min_samples,
            settings.dbscan_max_cluster_size)
    clusters = sklearn_two_stage(vectors, settings) if method == "sklearn" else two_stage_dbscan(vectors, *args)
    seconds = time.perf_counter() - started
    out = {"method": f"clustering only ({method})", "facts": facts, "seconds": seconds, "rss_before_mb": before,
           "peak_rss_mb": peak_mb(), "clusters": len(clusters), "noise": facts - sum(map(len, clusters))}
    if method == "sklearn":
        out["same_as_blocked"] = sorted(map(sorted, clusters)) == sorted(map(sorted, two_stage_dbscan(vectors, *args)))
    return out
