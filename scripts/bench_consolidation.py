"""Consolidation at scale: one synthetic user with N fresh facts (default 10,000).

Reports phase 1 time (triage + two-stage DBSCAN + graph context, no LLM), the clusters found,
LLM calls per phase against an instant scripted OpenAI-compatible server over HTTP, and the
process's peak memory. The facts are generated from slot-filled patterns across life domains:
fine for load, meaningless as training data.

    python scripts/bench_consolidation.py --facts 10000
"""

from __future__ import annotations

import argparse
import random
import re
import resource
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from dcpm.api.models import ConsentUpdate
from dcpm.config import Settings
from dcpm.consolidation.runs import consolidate_user
from dcpm.consolidation.triage import triage
from dcpm.service import MemoryService
from dcpm.store.items import NewItem, add_item
from dcpm.testing.scripted_llm import LLMServer
from dcpm.write.raw import touch_user

DOMAINS = {
    "fitness": ["went running {w} along the {p}", "did a {n}-minute yoga session {w}", "swam {n} lengths at the {p} pool",
                "cycled to the {p} and back {w}", "skipped the gym {w} because of a sore knee"],
    "food": ["cooked a {n}-ingredient curry {w}", "baked {n} loaves of sourdough {w}", "tried the new ramen place near the {p}",
             "meal-prepped lunches for {n} days {w}", "gave up caffeine after {n} pm {w}"],
    "work": ["had {n} back-to-back meetings {w}", "presented the quarterly numbers {w}", "stayed late at the {p} office {w}",
             "mentored a new hire for {n} hours {w}", "asked the manager for a raise {w}"],
    "money": ["put {n} pounds into savings {w}", "cancelled {n} streaming subscriptions {w}", "paid off the credit card {w}",
              "compared {n} energy tariffs {w}", "sold an old bike near the {p} {w}"],
    "family": ["called mum for {n} minutes {w}", "helped dad fix the {p} fence {w}", "babysat the niece for {n} hours {w}",
               "planned a family dinner at the {p} {w}", "argued with a brother about the {p} {w}"],
    "garden": ["planted {n} tomato seedlings {w}", "pruned the roses by the {p} {w}", "built a compost bin {w}",
               "watered the allotment near the {p} {w}", "harvested {n} courgettes {w}"],
}
WHEN = ["on Monday", "on Tuesday", "this morning", "last night", "at the weekend", "before work", "after dinner",
        "in the rain", "with a friend", "alone"]
PLACES = ["canal", "park", "river", "station", "market", "library", "harbour", "high street", "common", "leisure centre"]


def synthetic_facts(count: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    facts = []
    for n in range(count):
        domain = rng.choice(list(DOMAINS))
        pattern = rng.choice(DOMAINS[domain])
        text = "Sam " + pattern.format(w=rng.choice(WHEN), p=rng.choice(PLACES), n=rng.randint(2, 90))
        facts.append((f"{text} (note {n})", domain))
    return facts


def agent(prompt: str) -> list[tuple[str, dict]]:
    facts = re.findall(r"^\[(f\d+)\] \((\w+)\)", prompt, re.MULTILINE)
    nodes = re.findall(r"^\[(n\d+)\] schema \((\w+)\)", prompt, re.MULTILINE)
    handles = [f for f, _ in facts][:20]
    same = [n for n, d in nodes if d == facts[0][1]]
    if same:
        return [("add_evidence", {"node": same[0], "evidence": handles})]
    return [("create_schema", {"ref": "s1", "domain": facts[0][1], "text": f"Sam has a {facts[0][1]} routine",
                               "evidence": handles})]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--facts", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    with LLMServer() as llm, tempfile.TemporaryDirectory() as tmp:
        llm.script.induce = agent
        settings = Settings(data_dir=Path(tmp), llm_base_url=llm.url, llm_model="scripted")
        service = MemoryService(settings)
        started = time.perf_counter()
        facts = synthetic_facts(args.facts, args.seed)
        for start in range(0, len(facts), 1000):
            with service.db.session() as session:
                touch_user(session, "sam")
                items = [add_item(session, "sam", NewItem("fact", text, topic=domain,
                                                          valid_from=datetime(2025, 1, 1, tzinfo=timezone.utc)))
                         for text, domain in facts[start:start + 1000]]
            service.writer.index_rows(items=items)
        service.index.optimize()
        print(f"wrote {len(facts)} facts in {time.perf_counter() - started:.1f}s")
        service.consent("sam", ConsentUpdate(core_schemas=True))
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.perf_counter()
        found = triage(service.db, service.index, settings, "sam")
        phase1 = time.perf_counter() - started
        sizes = sorted((len(c.item_ids) for c in found.clusters), reverse=True)
        print(f"phase 1 (no LLM): {phase1:.2f}s, {len(found.clusters)} clusters (largest {sizes[:5]}), "
              f"{found.noise} noise items")
        started = time.perf_counter()
        report = consolidate_user(service.consolidation.backends, "sam")
        total = time.perf_counter() - started
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"full run: {total:.1f}s, status {report.status}, counts {report.counts}")
        print(f"LLM calls per phase: {report.llm_calls} (tokens {report.tokens})")
        print(f"peak RSS: {peak_mb:.0f} MB (before phase 1: {rss_before / 1024:.0f} MB)")
        service.close()


if __name__ == "__main__":
    main()
