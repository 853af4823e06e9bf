"""Query-encoding latency with and without the adapter (Madeleine B: batch 1, tokenization
included, median of repeated runs). Merged should cost about two frozen passes; unmerged more,
since every adapted layer adds its low-rank branch."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any, Sequence

DEFAULT_QUERIES = (
    "Sold my car this morning, the bus is honestly fine.",
    "Any good snacks for a long train ride that won't make me crash in the afternoon?",
    "My sister wants us all to go skiing in February, should I book?",
    "What did I say my dog's name was?",
)


def median_ms(encode: Any, queries: Sequence[str], runs: int, warmup: int = 5) -> float:
    for query in list(queries)[:warmup]:
        encode(query)
    timings = []
    for n in range(runs):
        started = time.perf_counter()
        encode(queries[n % len(queries)])
        timings.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(timings), 3)


def query_encoding_latency(embedder: Any, adapter: Path, queries: Sequence[str] = DEFAULT_QUERIES,
                           runs: int = 200) -> dict[str, float]:
    """Median ms of `encode_query` (dense + sparse) for the frozen encoder, the unmerged and
    the merged adapter, and each adapter's ratio to the frozen cost."""
    from dcpm.adapter.encoder import AssociativeQueryEncoder
    from dcpm.reader import FrozenQueryEncoder

    report = {"frozen_ms": median_ms(FrozenQueryEncoder(embedder).encode_query, queries, runs)}
    for label, merge in (("unmerged", False), ("merged", True)):
        encoder = AssociativeQueryEncoder(embedder, adapter, merge=merge)
        report[f"{label}_ms"] = median_ms(encoder.encode_query, queries, runs)
        report[f"{label}_ratio"] = round(report[f"{label}_ms"] / report["frozen_ms"], 2)
    return report
