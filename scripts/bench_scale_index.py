"""Index phase of the scale benchmark: SYNTHETIC points (bench_scale_data) loaded into one real
VectorIndex backend (the embedded qdrant-edge shard, or pgvector in a PostgreSQL 16 started by
pgserver), in two stages: about 10,000 memories holding all of the small user's, then the rest.
After each stage the index is optimized (HNSW built) and the read path's two queries are timed:
`query("dense", ...)` and `query("sparse", ...)` with the user's Scope and the candidate pool."""

from __future__ import annotations

import math
import resource
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from bench_scale_data import BIG, CHUNK, DIM, SMALL, Corpus, Layout, batches, point_id, schedule, split_at

from dcpm.config import Settings
from dcpm.index import Scope, VectorIndex
from dcpm.index.base import DENSE, SPARSE

WARMUP = 5


def du_mb(path: Path) -> float:
    return sum(f.stat().st_blocks * 512 for f in path.rglob("*") if f.is_file()) / 2**20  # allocated, not apparent


def self_rss() -> dict[str, float]:
    return {"bench_rss_mb": psutil.Process().memory_info().rss / 2**20,
            "bench_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


@contextmanager
def edge_index(workdir: Path) -> Iterator[tuple[VectorIndex, Callable[[], dict[str, float]]]]:
    from dcpm.index.edge import EdgeIndex

    index = EdgeIndex(Settings(data_dir=workdir), DIM, True)
    try:
        yield index, lambda: {"disk_mb": du_mb(workdir / "vectors"), **self_rss()}
    finally:
        index.close()


@contextmanager
def pgvector_index(workdir: Path) -> Iterator[tuple[VectorIndex, Callable[[], dict[str, float]]]]:
    from dcpm.index.pgvector import PgVectorIndex
    from dcpm.testing import postgres

    pgdata = workdir / "pgdata"
    server = postgres.start(pgdata)
    url = postgres.create_database(server, "bench")
    index = PgVectorIndex(Settings(data_dir=workdir, database_url=url, index_backend="pgvector"), DIM, True)

    def footprint() -> dict[str, float]:
        with index._pool.connection() as conn:  # the benchmark reads sizes as an operator would in psql
            tables = conn.execute("SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c "
                                  "WHERE c.relname LIKE 'dcpm_vectors%' AND c.relkind = 'r'").fetchone()[0]
        postmaster = psutil.Process(int((pgdata / "postmaster.pid").read_text().split()[0]))
        pss = sum(p.memory_full_info().pss for p in [postmaster, *postmaster.children(recursive=True)])
        return {"disk_mb": float(tables) / 2**20, "pgdata_mb": du_mb(pgdata), "postgres_pss_mb": pss / 2**20,
                **self_rss()}

    try:
        yield index, footprint
    finally:
        index.close()
        server.cleanup()


BACKENDS = {"edge": edge_index, "pgvector": pgvector_index}


def load(index: VectorIndex, corpus: Corpus, chunks: list, batch: int, label: str) -> tuple[float, int]:
    started, done, shown = time.perf_counter(), 0, 0
    total = sum(c[2] for c in chunks)
    for points in batches(corpus, chunks, batch):
        index.upsert(points)
        done += len(points)
        if done - shown >= 100_000:
            shown = done
            rate = done / (time.perf_counter() - started)
            print(f"  {label}: {done:,}/{total:,} points, {rate:,.0f}/s", flush=True)
    return time.perf_counter() - started, done


def exact_top(corpus: Corpus, user_id: str, count: int, queries: np.ndarray, k: int) -> list[set[str]]:
    """The true k nearest of each query among the user's first `count` memories (brute force)."""
    sims = np.concatenate([corpus.dense(user_id, part, min(CHUNK, count - part * CHUNK)) @ queries.T
                           for part in range(-(-count // CHUNK))])
    top = np.argsort(-sims, axis=0)[:k].T
    return [{point_id(user_id, int(n)) for n in row} for row in top]


def searches(index: VectorIndex, corpus: Corpus, user_id: str, held: int, queries: int, pool: int) -> dict[str, Any]:
    """p50/p95 (ms) of the dense query, the lexical query and both (what one search costs the
    index), and the dense channel's recall@10 against brute force."""
    asked = corpus.queries(user_id, queries + WARMUP)
    scope = Scope(user_id=user_id)
    times: dict[str, list[float]] = {"dense": [], "sparse": [], "both": []}
    found = []
    for n, (dense, sparse) in enumerate(asked):
        t0 = time.perf_counter()
        hits = index.query(DENSE, dense, scope, pool)
        t1 = time.perf_counter()
        index.query(SPARSE, sparse, scope, pool)
        t2 = time.perf_counter()
        if n >= WARMUP:
            times["dense"].append(t1 - t0)
            times["sparse"].append(t2 - t1)
            times["both"].append(t2 - t0)
            found.append({h.id for h in hits[:10]})
    truth = exact_top(corpus, user_id, held, np.stack([d for d, _ in asked[WARMUP:]]), 10)
    result: dict[str, Any] = {"user": user_id, "user_memories": held, "queries": queries,
                              "recall_at_10": float(np.mean([len(f & t) / 10 for f, t in zip(found, truth)]))}
    for name, values in times.items():
        result[f"{name}_p50_ms"] = float(np.percentile(values, 50) * 1000)
        result[f"{name}_p95_ms"] = float(np.percentile(values, 95) * 1000)
    return result


def timed(action: Callable[[], Any]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def run(backend: str, workdir: Path, layout: Layout, seed: int, batch: int, base_total: int, queries: int,
        pool: int) -> dict[str, Any]:
    """One backend, both stages; every number of the index tables."""
    corpus = Corpus(seed)
    sizes = layout.sizes()
    first, rest = split_at(schedule(sizes, seed), base_total)
    out: dict[str, Any] = {"backend": backend, "memories": layout.memories, "users": layout.users}
    with BACKENDS[backend](workdir) as (index, footprint):
        out["load_base_s"], out["base_total"] = load(index, corpus, first, batch, f"{backend} stage 1")
        out["build_base_s"] = timed(index.optimize)
        out["search_small_at_base"] = searches(index, corpus, SMALL, sizes[SMALL], queries, pool)
        print(f"  {backend}: stage 1 ({out['base_total']:,} points) loaded and searched", flush=True)
        out["load_rest_s"], rest_points = load(index, corpus, rest, batch, f"{backend} stage 2")
        out["build_s"] = timed(index.optimize)
        out["total"] = index.count()
        out["load_s"] = out["load_base_s"] + out["load_rest_s"]
        out["load_rate"] = rest_points / out["load_rest_s"]
        out["search_small"] = searches(index, corpus, SMALL, sizes[SMALL], queries, pool)
        out["search_big"] = searches(index, corpus, BIG, sizes[BIG], queries, pool)
        out["footprint"] = footprint()
    out["ratio_small_p50"] = out["search_small"]["both_p50_ms"] / out["search_small_at_base"]["both_p50_ms"]
    out["ratio_small_p95"] = out["search_small"]["both_p95_ms"] / out["search_small_at_base"]["both_p95_ms"]
    return out


def estimate(result: dict[str, Any], layout: Layout, target: Layout, user_graph_rows: int) -> dict[str, Any]:
    """Seconds at `target` sizes: loading linear in the points; the shard's HNSW build in
    N log N; pgvector's build is the big user's own graph, in B log B of that user's points
    (None when the run's big user was too small to get one)."""
    def nlogn(n: int) -> float:
        return n * math.log(max(n, 2))

    if result["backend"] != "pgvector":
        build = result["build_s"] * nlogn(target.memories) / nlogn(layout.memories)
    else:
        build = result["build_s"] * nlogn(target.big_user) / nlogn(layout.big_user) \
            if layout.big_user > user_graph_rows else None
    return {"load_s": target.memories / result["load_rate"], "build_s": build}
