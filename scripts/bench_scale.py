"""Scale benchmark (issue 13): the vector index backends at N memories over U users, search over
HTTP against one and three daemons on PostgreSQL, and consolidation phase 1 for one user with
many facts. Prints markdown tables (every ratio is computed within this one run) and, with
--json, writes the numbers.

Phases (each in a fresh process, so that peak RSS is the phase's own):
  index    SYNTHETIC vectors (bench_scale_data: clustered random unit vectors of dimension 384,
           Zipfian sparse terms), upserted in batches into the real backends (the embedded
           qdrant-edge shard, pgvector in PostgreSQL 16 via pgserver) and queried with the read
           path's `query(using, vector, Scope, limit)`: load and HNSW build time, disk, RSS,
           search p50/p95 for a user with --small-user and one with --big-user memories, and
           the small user's search at ~--base-total memories in all vs at --memories (the
           O(log N + k) read cost says the ratio stays <= 2).
  http     real `dcpm serve` daemons on one PostgreSQL with pgvector; --http-memories sentences
           written through the import path (no extraction), searched by 1, 4, 16 clients.
  cluster  DCPM 2.3 phase 1 (`triage`) for one user with --cluster-facts facts (synthetic
           vectors), and, with --compare-sklearn, the previous clustering on the same vectors.

    python scripts/bench_scale.py --memories 50000 --users 100 --big-user 20000 --json scale.json
    python scripts/bench_scale.py --backends edge --skip-http --skip-cluster   # the full 1M, shard only
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import psutil
from bench_scale_data import Layout

FULL = Layout(1_000_000, 1_000, 100_000, 1_000)  # the sizes, for the estimates
# Rates measured on the development machine (2 busy cores, 2026-12): only to print a plan first.
RATES = {"edge_points_s": 4_500, "edge_build_s_at_50k": 65.0, "pg_points_s": 1_200, "pg_graph_s_at_20k": 28.0,
         "import_turns_s": 70, "facts_rows_s": 650, "phase1_s_at_10k": 11.0}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--memories", type=int, default=FULL.memories, help="memories in the index phase")
    p.add_argument("--users", type=int, default=FULL.users)
    p.add_argument("--big-user", type=int, default=FULL.big_user, help="memories of the big user")
    p.add_argument("--small-user", type=int, default=FULL.small_user, help="memories of the small user")
    p.add_argument("--base-total", type=int, default=10_000, help="memories in all at the first measurement")
    p.add_argument("--backends", default="edge,pgvector", help="comma-separated: edge, pgvector")
    p.add_argument("--batch", type=int, default=1000, help="points per upsert")
    p.add_argument("--queries", type=int, default=200, help="timed searches per measurement")
    p.add_argument("--pool", type=int, default=None, help="limit per query (default: Settings.candidate_pool)")
    p.add_argument("--http-memories", type=int, default=20_000)
    p.add_argument("--http-users", type=int, default=20)
    p.add_argument("--http-clients", default="1,4,16")
    p.add_argument("--http-seconds", type=float, default=20.0, help="seconds per (daemons, clients) round")
    p.add_argument("--cluster-facts", default="10000,100000")
    p.add_argument("--compare-sklearn", type=int, default=10_000, metavar="MAX",
                   help="run the previous (scikit-learn) clustering up to this many facts; 0: never")
    p.add_argument("--skip-index", action="store_true")
    p.add_argument("--skip-http", action="store_true")
    p.add_argument("--skip-cluster", action="store_true")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--workdir", type=Path, default=None, help="where the stores go (default: a temp dir)")
    p.add_argument("--json", type=Path, default=None, metavar="OUT")
    return p.parse_args(argv)


def isolated(function: Callable[..., Any], *args: Any) -> Any:
    """Run one phase in a fresh interpreter and return its result."""
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        return pool.submit(function, *args).result()


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "load_average_at_start": [round(x, 1) for x in os.getloadavg()], "platform": platform.platform(),
            "python": platform.python_version()}


def plan(args: argparse.Namespace) -> list[list[Any]]:
    """Expected seconds per phase on a machine like the development one (see RATES)."""
    def nlogn(n: float) -> float:
        return n * math.log(max(n, 2))

    rows: list[list[Any]] = []
    backends = [] if args.skip_index else args.backends.split(",")
    if "edge" in backends:
        rows.append(["index, edge", args.memories / RATES["edge_points_s"]
                     + RATES["edge_build_s_at_50k"] * nlogn(args.memories) / nlogn(50_000)])
    if "pgvector" in backends:
        rows.append(["index, pgvector", args.memories / RATES["pg_points_s"]
                     + RATES["pg_graph_s_at_20k"] * nlogn(args.big_user) / nlogn(20_000)])
    if not args.skip_http:
        rounds = 2 * len(args.http_clients.split(",")) * (args.http_seconds + 2)
        rows.append(["http", args.http_memories / RATES["import_turns_s"] + rounds + 60])
    for facts in [] if args.skip_cluster else [int(f) for f in args.cluster_facts.split(",")]:
        reference = 2 if facts <= args.compare_sklearn else 0
        rows.append([f"cluster, {facts:,} facts", facts / RATES["facts_rows_s"]
                     + (1 + reference) * RATES["phase1_s_at_10k"] * (facts / 10_000) ** 2])
    return rows


def table(head: list[str], rows: list[list[Any]]) -> str:
    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"
        return f"{value:,}" if isinstance(value, int) else str(value)

    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows])


def index_phase(args: argparse.Namespace, workdir: Path, report: dict[str, Any]) -> None:
    import bench_scale_index as bi

    from dcpm.config import Settings

    layout = Layout(args.memories, args.users, args.big_user, args.small_user)
    settings = Settings()
    pool = args.pool or settings.candidate_pool
    results = []
    for backend in args.backends.split(","):
        print(f"index phase: {backend}, {layout.memories:,} memories over {layout.users:,} users", flush=True)
        where = workdir / f"index-{backend}"
        where.mkdir(parents=True, exist_ok=True)
        result = isolated(bi.run, backend, where, layout, args.seed, args.batch, args.base_total, args.queries, pool)
        result["estimate_full"] = bi.estimate(result, layout, FULL, settings.pgvector_user_hnsw_rows)
        results.append(result)
    report["index"] = results
    print("\n### Index: load, build, footprint (synthetic vectors)\n")
    print(table(["backend", "memories", "users", "load s", "points/s", "HNSW build s", "disk MB", "RSS MB"],
                [[r["backend"], r["total"], r["users"], r["load_s"], r["load_rate"], r["build_s"],
                  r["footprint"]["disk_mb"], _rss(r["footprint"])] for r in results]))
    print(f"\n### Index: search, limit {pool} per query (dense + lexical = what one search asks the index)\n")
    rows = []
    for r in results:
        for stage, total in (("search_small_at_base", r["base_total"]), ("search_small", r["total"]),
                             ("search_big", r["total"])):
            s = r[stage]
            rows.append([r["backend"], s["user_memories"], total, s["dense_p50_ms"], s["dense_p95_ms"],
                         s["sparse_p50_ms"], s["sparse_p95_ms"], s["both_p50_ms"], s["both_p95_ms"],
                         s["recall_at_10"]])
    print(table(["backend", "user's memories", "memories in all", "dense p50 ms", "dense p95 ms", "lexical p50 ms",
                 "lexical p95 ms", "both p50 ms", "both p95 ms", "dense recall@10"], rows))
    print("\n### Index: the same user's search, small vs large index (O(log N + k): ratio <= 2)\n")
    print(table(["backend", "user's memories", "in all (before)", "in all (after)", "p50 ratio", "p95 ratio",
                 "within 2x"],
                [[r["backend"], r["search_small"]["user_memories"], r["base_total"], r["total"], r["ratio_small_p50"],
                  r["ratio_small_p95"], "yes" if max(r["ratio_small_p50"], r["ratio_small_p95"]) <= 2 else "NO"]
                 for r in results]))


def _rss(footprint: dict[str, float]) -> str:
    if "postgres_pss_mb" in footprint:
        return f"{footprint['bench_rss_mb']:.0f} client + {footprint['postgres_pss_mb']:.0f} postgres (PSS)"
    return f"{footprint['bench_rss_mb']:.0f} (peak {footprint['bench_peak_rss_mb']:.0f})"


def http_phase(args: argparse.Namespace, workdir: Path, report: dict[str, Any]) -> None:
    import bench_scale_http as bh

    print(f"http phase: {args.http_memories:,} memories over {args.http_users} users", flush=True)
    clients = [int(c) for c in args.http_clients.split(",")]
    result = isolated(bh.run, args.http_memories, args.http_users, args.http_seconds, clients, args.seed,
                      workdir / "http")
    report["http"] = result
    print(f"\n### HTTP search, PostgreSQL + pgvector, {result['memories']:,} memories over {result['users']} users "
          f"(real embeddings; imported at {result['import_rate']:.0f}/s)\n")
    single = {r["clients"]: r["throughput"] for r in result["rounds"] if r["daemons"] == 1}
    print(table(["daemons", "clients", "requests", "errors", "req/s", "p50 ms", "p95 ms", "daemon's took_ms p50",
                 "req/s vs 1 daemon"],
                [[r["daemons"], r["clients"], r["requests"], r["errors"], r["throughput"], r["p50_ms"], r["p95_ms"],
                  r.get("server_p50_ms"), r["throughput"] / single[r["clients"]]] for r in result["rounds"]]))


def cluster_phase(args: argparse.Namespace, workdir: Path, report: dict[str, Any]) -> None:
    import bench_scale_cluster as bc

    rows = []
    for facts in [int(f) for f in args.cluster_facts.split(",")]:
        print(f"cluster phase: {facts:,} facts", flush=True)
        where = workdir / f"cluster-{facts}"
        where.mkdir(parents=True, exist_ok=True)
        loaded = isolated(bc.load, where, facts, args.seed)
        rows.append({**isolated(bc.phase1, where), "load_s": loaded["load_s"]})
        if facts <= args.compare_sklearn:
            rows.append(isolated(bc.reference, facts, args.seed, "blocked"))
            rows.append(isolated(bc.reference, facts, args.seed, "sklearn"))
    report["cluster"] = rows
    print("\n### Consolidation phase 1, one user (synthetic vectors)\n")
    print(table(["facts", "what", "seconds", "RSS before MB", "peak RSS MB", "clusters", "noise", "same clusters"],
                [[r["facts"], r["method"], r["seconds"], r["rss_before_mb"], r["peak_rss_mb"], r["clusters"],
                  r["noise"], {True: "yes", False: "NO"}.get(r.get("same_as_blocked"), "")] for r in rows]))


def estimates(report: dict[str, Any]) -> None:
    """Measured seconds per phase and what the issue's full sizes should take."""
    rows = []
    for r in report.get("index", []):
        e = r["estimate_full"]
        rows.append([f"index load, {r['backend']}", r["total"], r["load_s"], FULL.memories, e["load_s"]])
        rows.append([f"index build, {r['backend']}", r["total"], r["build_s"], FULL.memories,
                     "n/a (no user graph built)" if e["build_s"] is None else e["build_s"]])
    blocked = [r for r in report.get("cluster", []) if r["method"].startswith("triage")]
    if blocked:
        largest = max(blocked, key=lambda r: r["facts"])
        rows.append(["cluster phase 1 (N^2)", largest["facts"], largest["seconds"], 100_000,
                     largest["seconds"] * (100_000 / largest["facts"]) ** 2])
    if rows:
        print("\n### Time per phase, and an estimate at the issue's sizes (1M memories, big user 100k)\n")
        print(table(["phase", "size run", "seconds", "full size", "estimated s"], rows))


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    report: dict[str, Any] = {"command": " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]),
                              "machine": machine(), "vectors": "synthetic in the index and cluster phases"}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-scale-", dir=args.workdir) as tmp:
        workdir = Path(tmp)
        print(f"# Scale benchmark\n\n`{report['command']}`; machine: {report['machine']}\n"
              "Index and cluster phases use SYNTHETIC vectors (no embedder); the HTTP phase embeds for real.\n",
              flush=True)
        print("Expected seconds per phase (rates of a 2-core development machine):\n")
        print(table(["phase", "expected s"], plan(args)) + "\n", flush=True)
        for name, phase in (("index", index_phase), ("http", http_phase), ("cluster", cluster_phase)):
            if getattr(args, f"skip_{name}"):
                continue
            try:
                phase(args, workdir, report)
            except Exception as exc:  # noqa: BLE001 - one broken phase must not cost the others their numbers
                report.setdefault("errors", {})[name] = repr(exc)
                print(f"\n{name} phase FAILED: {exc!r}", flush=True)
            if args.json:
                args.json.write_text(json.dumps(report, indent=2))
    estimates(report)
    report["seconds"] = time.perf_counter() - started
    print(f"\ntotal {report['seconds']:.0f}s")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
