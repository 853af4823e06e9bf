"""Write/read benchmark of the real service: bulk import, optimize, and search latency.

What it measures (per size N in --sizes, each in a fresh data directory)
    * Corpus: one target user with N turns, plus N * --other-ratio turns spread over
      --other-users other users, all written through `MemoryService.import_turns` (real
      embeddings, SQLite, the embedded qdrant-edge index), batches of users interleaved.
      Sentences are LoCoMo turn texts, cycled; each pass over the data gets other speaker
      names and a " (session <k>)" suffix so no two memories are identical. This is a
      benchmark corpus only, nothing is trained on it.
    * Import throughput (turns/s) for the whole import phase, and how that time splits into
      document embedding, index upsert, and the rest (SQLite writes, checks).
    * `svc.index.optimize()` time (HNSW build, as the daemon's maintenance does).
    * Over --queries questions (LoCoMo questions, cycled) for the target user:
        - full read path: `svc.search(SearchRequest(limit=10))`, p50/p95, split into
          query encoding, dense ANN, sparse ANN, dense scores of sparse-only candidates,
          and the rest (fusion, SQLite hydration, context rendering, validation);
          the query encoder is the frozen embedder unless --set query_adapter=DIR is given;
        - the same full read path with the associative adapter (--adapter, default: the
          shipped one, merged as the daemon serves it), on the same index;
        - bare vector query: `svc.index.query("dense", vector, Scope(user_id), 10)` with a
          precomputed query vector, p50/p95;
        - query encoding alone; and the ratio full/bare.
    * Query encoding at batch 1 (Madeleine B: median, tokenization included, the encoders
      taking turns): frozen E, E + unmerged adapter, E + merged adapter, and the ratios.

Run
    . .venv/bin/activate
    python scripts/bench_search.py --sizes 10000             # 20k turns: ~15 min on 2 busy cores
    python scripts/bench_search.py                            # 10k and 100k: the 100k size is
                                                              # 200k turns, ~10x longer (hours on 2 cores)
    python scripts/bench_search.py --sizes 2000 --queries 50 --json bench.json
    python scripts/bench_search.py --sizes 10000 --anticipations 1   # every memory with anticipations
    python scripts/bench_search.py --sizes 100000 --anticipations 1 --warm-pass   # and the same queries again
    python scripts/bench_search.py --sizes 20000 --anticipations 1 --after-write  # each search after a write
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo" / "locomo10.json"
NAMES = ["Alex", "Sam", "Priya", "Jonas", "Mei", "Omar", "Lucia", "Tom", "Aisha", "Ivan", "Nora", "Kenji",
         "Fatima", "Leo", "Grace", "Mateo", "Zoe", "Ravi", "Elena", "Kwame"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="10000,100000", help="comma-separated N (turns of the target user)")
    p.add_argument("--other-users", type=int, default=20, help="users sharing the index with the target")
    p.add_argument("--other-ratio", type=float, default=1.0, help="other users' turns, as a multiple of N")
    p.add_argument("--queries", type=int, default=200, help="timed queries per size")
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo json used for sentences and queries")
    p.add_argument("--data-dir", type=Path, default=None, help="parent of the per-size data dirs (default: temp)")
    p.add_argument("--keep", action="store_true", help="keep the data directories")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="a Settings field, e.g. --set embed_batch_size=32 (repeatable)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch intra-op threads, as Settings.query_threads (default: that setting's default)")
    p.add_argument("--adapter", default="default",
                   help="associative adapter to time: a directory, 'default' (shipped) or 'none' (skip)")
    p.add_argument("--anticipations", type=float, default=0.0, metavar="FRACTION",
                   help="give this fraction of the target's memories anticipations, as extraction with an LLM "
                        "would (the read path then searches them: a dense and a sparse ANN query more)")
    p.add_argument("--warm-pass", action="store_true",
                   help="time the frozen search a second time over the same queries (the first pass is the "
                        "first touch of each query's postings in a freshly optimized shard)")
    p.add_argument("--after-write", action="store_true",
                   help="time the frozen search once more, each query right after the target user wrote a turn "
                        "(as in a chat, where every search follows the user's own add_memory)")
    p.add_argument("--json", type=Path, default=None, metavar="OUT", help="write the numbers as JSON")
    return p.parse_args(argv)


def load_corpus(path: Path) -> tuple[list[tuple[str, str]], list[str]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    turns, questions = [], []
    for sample in data:
        conv = sample["conversation"]
        for key, value in conv.items():
            if key.startswith("session_") and isinstance(value, list):
                turns.extend((t["speaker"], t["text"]) for t in value)
        questions.extend(q["question"] for q in sample["qa"])
    return turns, questions


def make_turns(user_id: str, count: int, offset: int, corpus: list[tuple[str, str]]) -> list:
    """`count` turns for a user, cycled from the corpus starting at `offset`; deterministic ids."""
    from dcpm.domain import Turn
    from dcpm.write.raw import deterministic_raw_id

    start = datetime(2023, 1, 1)
    turns = []
    for n in range(count):
        cycle, position = divmod(offset + n, len(corpus))
        speaker, text = corpus[position]
        if cycle:  # later passes: other speaker names and a suffix, so no memory repeats
            speaker, text = NAMES[(cycle + zlib.crc32(speaker.encode())) % len(NAMES)], f"{text} (session {cycle})"
        turn = Turn(text=text, speaker=speaker, session_id=f"s{n // 20}",
                    timestamp=start + timedelta(minutes=7 * n))
        turn.id = deterministic_raw_id(user_id, turn, n)
        turns.append(turn)
    return turns


@contextmanager
def timed_methods(obj: Any, names: list[str], key: Callable[..., str] | None = None) -> Iterator[dict]:
    """Wrap bound methods of one instance to add their wall time into the yielded dict."""
    spent: dict[str, float] = defaultdict(float)

    def wrap(name: str, method: Callable) -> Callable:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                spent[key(name, *args) if key else name] += time.perf_counter() - t0
        return timed

    for name in names:
        setattr(obj, name, wrap(name, getattr(obj, name)))
    try:
        yield spent
    finally:
        for name in names:
            delattr(obj, name)  # back to the class's method


def bench_import(svc, n: int, corpus: list[tuple[str, str]], others: int, ratio: float) -> dict[str, Any]:
    per_user = [("target", n)] + [(f"other-{k:02d}", int(n * ratio) // others) for k in range(others)]
    batch = min(svc.settings.import_batch_size, svc.settings.max_messages)
    jobs = []
    for number, (user, count) in enumerate(per_user):
        turns = make_turns(user, count, number * 997, corpus)
        jobs.append([(user, turns[s:s + batch]) for s in range(0, count, batch)])
    order = [job for round_ in zip(*_padded(jobs)) for job in round_ if job]  # interleave users
    total = sum(len(t) for _, t in order)
    with timed_methods(svc.embedder, ["encode_documents"]) as embed_t, \
            timed_methods(svc.index, ["upsert"]) as upsert_t, \
            tqdm(total=total, desc=f"import N={n}", unit="turn") as bar:
        t0 = time.perf_counter()
        for user, turns in order:
            svc.import_turns(user, turns)
            bar.update(len(turns))
        seconds = time.perf_counter() - t0
    embed, upsert = embed_t["encode_documents"], upsert_t["upsert"]
    return {"turns": total, "seconds": seconds, "turns_per_s": total / seconds, "embed_s": embed,
            "upsert_s": upsert, "other_s": seconds - embed - upsert}


def add_anticipations(svc, n: int, fraction: float, corpus: list[tuple[str, str]]) -> int:
    """Companion points (dcpm.index.anticipation) for the first `fraction` of the target's turns,
    written to the backend as the index writes them; each embeds another LoCoMo turn's text, as
    a stand-in for a sentence extraction would write about a later situation."""
    from dcpm.index import IndexPoint
    from dcpm.index.anticipation import companion_id, companion_user
    from dcpm.index.base import OPEN_END

    turns = make_turns("target", int(n * fraction), 0, corpus)
    others = make_turns("target", len(turns), 7919, corpus)  # another turn's words for each
    for start in tqdm(range(0, len(turns), 256), desc="anticipations", unit="batch"):
        chunk = turns[start:start + 256]
        encoded = svc.embedder.encode_documents([t.text for t in others[start:start + 256]])
        svc.index.inner.upsert([IndexPoint(companion_id(t.id), encoded.dense[k], encoded.sparse[k], {
            "user_id": companion_user("target"), "kind": "raw", "session_id": t.session_id,
            "valid_from": t.timestamp.timestamp(), "valid_to": OPEN_END}) for k, t in enumerate(chunk)])
    return len(turns)


def _padded(jobs: list[list]) -> list[list]:
    longest = max(len(j) for j in jobs)
    return [j + [None] * (longest - len(j)) for j in jobs]


def percentiles(values: list[float]) -> dict[str, float]:
    ms = np.asarray(values) * 1000
    return {"p50": float(np.percentile(ms, 50)), "p95": float(np.percentile(ms, 95)), "mean": float(ms.mean())}


def bench_queries(svc, questions: list[str], count: int, before: Callable[[int], None] | None = None) -> dict[str, Any]:
    """`before(i)`, when given, runs untimed right before the i-th full search."""
    from dcpm.api.models import SearchRequest
    from dcpm.index import Scope
    from dcpm.index.base import DENSE

    queries = [questions[i % len(questions)] for i in range(count)]
    scope = Scope(user_id="target")
    for q in queries[:5]:  # warm-up: caches, lazy init
        svc.search(SearchRequest(user_id="target", query=q, limit=10))
    full, bare, encode, parts = [], [], [], defaultdict(list)
    vectors = [svc.query_encoder.encode_query(q).dense for q in queries]
    for i, (query, vector) in enumerate(tqdm(list(zip(queries, vectors)), desc="queries", unit="q")):
        t0 = time.perf_counter()
        svc.query_encoder.encode_query(query)
        encode.append(time.perf_counter() - t0)

        t0 = time.perf_counter()
        svc.index.query(DENSE, vector, scope, 10)
        bare.append(time.perf_counter() - t0)

        if before is not None:
            before(i)
        with timed_methods(svc.query_encoder, ["encode_query"]) as enc_t, \
                timed_methods(svc.index, ["query", "dense_scores"], key=lambda name, *a: f"{name}:{a[0]}"
                              if name == "query" else name) as idx_t:
            t0 = time.perf_counter()
            svc.search(SearchRequest(user_id="target", query=query, limit=10))
            total = time.perf_counter() - t0
        full.append(total)
        split = {"encode": enc_t["encode_query"], "ann_dense": idx_t["query:dense"],
                 "ann_sparse": idx_t["query:sparse"],
                 "ann_anticipation": idx_t["query:anticipation"] + idx_t["query:anticipation_terms"],
                 "dense_lookup": idx_t["dense_scores"]}
        split["fusion_hydrate"] = total - sum(split.values())
        for name, value in split.items():
            parts[name].append(value)
    result = {"full": percentiles(full), "bare": percentiles(bare), "encode": percentiles(encode),
              "breakdown": {name: percentiles(v) for name, v in parts.items()}}
    result["ratio_full_bare_p50"] = result["full"]["p50"] / result["bare"]["p50"]
    steps = sum(result["breakdown"][part]["p50"] for part in ("encode", "ann_dense", "ann_sparse"))
    result["ratio_full_steps_p50"] = result["full"]["p50"] / steps  # issue 15's goal: <= 1.3
    # with anticipations the read path makes two more ANN queries; this ratio counts them as steps
    result["ratio_full_steps3_p50"] = result["full"]["p50"] / (steps + result["breakdown"]["ann_anticipation"]["p50"])
    return result


def run_size(n: int, args: argparse.Namespace, parent: Path, corpus, questions) -> dict[str, Any]:
    from dcpm.config import Settings
    from dcpm.service import MemoryService

    threads = {} if args.threads is None else {"query_threads": args.threads}
    overrides = {"query_adapter": "none", **threads, **dict(pair.split("=", 1) for pair in args.overrides)}
    data_dir = parent / f"n{n}"
    t0 = time.perf_counter()
    svc = MemoryService(Settings(data_dir=data_dir, **overrides))
    startup = time.perf_counter() - t0
    import torch

    print(f"torch threads: {torch.get_num_threads()}, CPUs: {os.cpu_count()}")
    try:
        imported = bench_import(svc, n, corpus, args.other_users, args.other_ratio)
        imported["anticipating"] = add_anticipations(svc, n, args.anticipations, corpus) if args.anticipations else 0
        t0 = time.perf_counter()
        svc.index.optimize()
        optimize_s = time.perf_counter() - t0
        points = {"total": svc.index.count(), "target": svc.index.count("target")}
        queries = bench_queries(svc, questions, args.queries)
        warm = {"search_warm": bench_queries(svc, questions, args.queries)} if args.warm_pass else {}
        if args.after_write:
            warm.update(bench_after_write(svc, n, corpus, questions, args.queries))
        associative = bench_adapter(svc, args.adapter, questions, args.queries)
    finally:
        svc.close()
        if not args.keep:
            shutil.rmtree(data_dir, ignore_errors=True)
    return {"n": n, "startup_s": startup, "import": imported, "optimize_s": optimize_s, "points": points,
            "search": queries, **warm, **associative}


def bench_after_write(svc, n: int, corpus, questions: list[str], count: int) -> dict[str, Any]:
    """Each search right after the target wrote a turn, as in a chat; then the same with the IDF
    counts of the target (and of its anticipations) dropped at each write, as before they followed
    the writes: the baseline, in the same run."""
    fresh = make_turns("target", 2 * count, n, corpus)  # turns the target has not said yet
    frequencies = getattr(svc.index.inner, "_frequencies", None)

    def write(i: int, recount: bool) -> None:
        svc.import_turns("target", [fresh[2 * i + recount]])
        if recount and frequencies is not None:
            frequencies.forget({"target", "target#anticipations"})

    return {"search_after_write": bench_queries(svc, questions, count, before=lambda i: write(i, False)),
            "search_after_write_recount": bench_queries(svc, questions, count, before=lambda i: write(i, True))}


def bench_adapter(svc, setting: str, questions: list[str], count: int) -> dict[str, Any]:
    """The associative adapter on the same index: its encoding cost against the frozen encoder
    (unmerged and merged) and the full search with the merged one, as the daemon serves it."""
    from dcpm.adapter.encoder import AssociativeQueryEncoder, adapter_directory
    from dcpm.adapter.latency import query_encoding_latency

    directory = adapter_directory(setting)
    if directory is None:
        return {}
    encoding = query_encoding_latency(svc.embedder, directory)
    frozen, svc.query_encoder = svc.query_encoder, AssociativeQueryEncoder(svc.embedder, directory, merge=True,
                                                                      fusion=svc.settings.adapter_fusion)
    try:
        return {"adapter_encoding": encoding, "search_adapter": bench_queries(svc, questions, count)}
    finally:
        svc.query_encoder = frozen


def print_summary(results: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="dcpm search benchmark (times in ms unless noted)", show_edge=False)
    table.add_column("metric")
    for r in results:
        table.add_column(f"N={r['n']:,}", justify="right")

    def row(label: str, fmt: Callable[[dict], str]) -> None:
        table.add_row(label, *(fmt(r) for r in results))

    row("points in index (target)", lambda r: f"{r['points']['total']:,} ({r['points']['target']:,})")
    row("import turns/s", lambda r: f"{r['import']['turns_per_s']:.1f}")
    row("import s: total / embed / upsert / rest",
        lambda r: "{seconds:.0f} / {embed_s:.0f} / {upsert_s:.0f} / {other_s:.0f}".format(**r["import"]))
    row("optimize() s", lambda r: f"{r['optimize_s']:.1f}")
    table.add_section()
    for label, key in (("full search p50 / p95", "full"), ("bare dense query p50 / p95", "bare"),
                       ("query encoding p50 / p95", "encode")):
        row(label, lambda r, k=key: f"{r['search'][k]['p50']:.2f} / {r['search'][k]['p95']:.2f}")
    row("ratio full / bare (p50)", lambda r: f"{r['search']['ratio_full_bare_p50']:.1f}x")
    row("ratio full / (encoding + dense ANN + sparse ANN), p50",
        lambda r: f"{r['search']['ratio_full_steps_p50']:.2f}x")
    row("ratio full / (those + anticipation ANNs), p50; memories with anticipations",
        lambda r: f"{r['search']['ratio_full_steps3_p50']:.2f}x; {r['import']['anticipating']:,}")
    if all("search_warm" in r for r in results):
        row("full search, same queries again p50 / p95", lambda r: "{p50:.2f} / {p95:.2f}".format(
            **r["search_warm"]["full"]))
        for part in ("ann_sparse", "ann_anticipation", "fusion_hydrate"):
            row(f"  {part} p95, first pass / again", lambda r, p=part: "{:.2f} / {:.2f}".format(
                r["search"]["breakdown"][p]["p95"], r["search_warm"]["breakdown"][p]["p95"]))
    if all("search_after_write" in r for r in results):
        for label, key in (("full search, each after a write of the user p50 / p95", "search_after_write"),
                           ("  the same, its words counted again (before) p50 / p95", "search_after_write_recount")):
            row(label, lambda r, k=key: "{p50:.2f} / {p95:.2f}".format(**r[k]["full"]))
        row("  ratio counted again / kept, p50", lambda r: "{:.2f}x".format(
            r["search_after_write_recount"]["full"]["p50"] / r["search_after_write"]["full"]["p50"]))
    if all("search_adapter" in r for r in results):
        table.add_section()
        row("full search, merged adapter p50 / p95",
            lambda r: "{p50:.2f} / {p95:.2f}".format(**r["search_adapter"]["full"]))
        for name in ("frozen", "unmerged", "merged"):
            row(f"query encoding batch 1, {name} (median)",
                lambda r, k=name: f"{r['adapter_encoding'][k + '_ms']:.2f}"
                + ("" if k == "frozen" else f" ({r['adapter_encoding'][k + '_ratio']:.2f}x)"))
    table.add_section()
    for part in ("encode", "ann_dense", "ann_sparse", "ann_anticipation", "dense_lookup", "fusion_hydrate"):
        row(f"  full path: {part} p50 / mean",
            lambda r, p=part: "{p50:.2f} / {mean:.2f}".format(**r["search"]["breakdown"][p]))
    Console().print(table)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    corpus, questions = load_corpus(args.data)
    import torch

    parent = args.data_dir or Path(tempfile.mkdtemp(prefix="dcpm-bench-"))
    parent.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        for n in sizes:
            results.append(run_size(n, args, parent, corpus, questions))
            print_summary(results)
    finally:
        if args.data_dir is None and not args.keep:
            shutil.rmtree(parent, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps({"sizes": sizes, "torch_threads": torch.get_num_threads(),
                                         "other_users": args.other_users,
                                         "other_ratio": args.other_ratio, "results": results}, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
