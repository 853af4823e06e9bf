"""Query-encoding latency with and without the adapter (Madeleine B: batch 1, tokenization
included, median of repeated runs). Merged, the summed form costs two passes of compute (the
paper: 1.86x) but runs them at once when a core is free for each (dcpm.embedding.threads), so
its wall time is nearer one; unmerged adds a low-rank branch to every adapted layer."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from dcpm.adapter.encoder import AssociativeQueryEncoder
from dcpm.embedding.base import AdaptableEmbedder
from dcpm.read.query import FrozenQueryEncoder

DEFAULT_QUERIES = (
    "Sold my car this morning, the bus is honestly fine.",
    "Any good snacks for a long train ride that won't make me crash in the afternoon?",
    "My sister wants us all to go skiing in February, should I book?",
    "What did I say my dog's name was?",
)


def interleaved_medians(encoders: dict[str, Callable[[str], Any]], queries: Sequence[str], runs: int,
                        warmup: int = 5) -> dict[str, float]:
    """Median ms per encoder; the encoders take turns on each query, so a noisy neighbour on a
    shared machine slows them alike instead of biasing the ratio."""
    for encode in encoders.values():
        for query in list(queries)[:warmup]:
            encode(query)
    timings: dict[str, list[float]] = {name: [] for name in encoders}
    for n in range(runs):
        for name, encode in encoders.items():
            started = time.perf_counter()
            encode(queries[n % len(queries)])
            timings[name].append((time.perf_counter() - started) * 1000)
    return {name: round(statistics.median(values), 3) for name, values in timings.items()}


def query_encoding_latency(embedder: AdaptableEmbedder, adapter: Path, queries: Sequence[str] = DEFAULT_QUERIES,
                           runs: int = 200) -> dict[str, float]:
    """Median ms of `encode_query` (dense + sparse) for the frozen encoder, the unmerged and the
    merged adapter, and each adapter's ratio to the frozen cost. For scripts/bench_search.py."""

    encoders = {"frozen": FrozenQueryEncoder(embedder).encode_query,
                "unmerged": AssociativeQueryEncoder(embedder, adapter, merge=False).encode_query,
                "merged": AssociativeQueryEncoder(embedder, adapter, merge=True).encode_query}
    medians = interleaved_medians(encoders, queries, runs)
    report = {f"{name}_ms": value for name, value in medians.items()}
    for name in ("unmerged", "merged"):
        report[f"{name}_ratio"] = round(medians[name] / medians["frozen"], 2)
    return report
