"""Writer overhead: time per add_memory outside the LLM, against an instant scripted server.

Every request goes through the real `openai` client over HTTP to a local server that answers at
once, so what remains is dcpm's own cost: raw persist, embedding, candidate search, the
transaction and the vector upsert. Prints LLM calls per request and p50/p95 of total and
non-LLM time.

    python scripts/bench_writer.py --requests 200
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from dcpm.api.models import AddMemoryRequest
from dcpm.config import Settings
from dcpm.service import MemoryService
from dcpm.testing.scripted_llm import LLMServer

SENTENCES = [
    "I started night shifts at the hospital this week", "My sister Lena is moving to Porto in spring",
    "I gave up sugar in my coffee", "We adopted a rescue cat called Biscuit", "I'm training for a 10k in June",
    "My landlord is raising the rent again", "I switched my commute to the early ferry",
    "I've been learning Portuguese on the train", "Dad's knee surgery is booked for the 14th",
    "I quit the book club, too much drama",
]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--users", type=int, default=4)
    args = parser.parse_args()
    with LLMServer() as llm, tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp), llm_base_url=llm.url, llm_model="scripted")
        service = MemoryService(settings)
        add = lambda n: service.add_memory(AddMemoryRequest(  # noqa: E731
            user_id=f"user{n % args.users}", messages=[{"content": f"{SENTENCES[n % len(SENTENCES)]} (#{n})"}]))
        add(-1)  # warm-up: model and index first touch
        results = [add(n) for n in range(args.requests)]
        service.close()
    totals = [r.timings_ms["total"] for r in results]
    non_llm = [r.timings_ms["non_llm"] for r in results]
    llm_ms = [r.timings_ms["llm"] for r in results]
    calls = [r.llm_calls for r in results]
    print(f"add_memory requests: {len(results)} over {args.users} users (instant scripted LLM over HTTP)")
    print(f"LLM calls per request: mean {statistics.mean(calls):.2f}, max {max(calls)}")
    print(f"{'':<22}{'p50 ms':>10}{'p95 ms':>10}")
    for name, values in (("total", totals), ("LLM round trips", llm_ms), ("non-LLM (dcpm)", non_llm)):
        print(f"{name:<22}{percentile(values, 0.5):>10.1f}{percentile(values, 0.95):>10.1f}")


if __name__ == "__main__":
    main()
