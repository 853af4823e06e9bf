"""Cold start of the CLI without a daemon: wall time of each inspection command as a fresh process.

Fills a store first (a few users' turns, with items extracted by the scripted OpenAI-compatible
server so that `show` and `history` have an item to show), then runs every command N times as a
new `dcpm` process, as a user at a shell would, and prints the median and p90 wall time per
command as a markdown table, with `python -c pass` as the floor and `dcpm search` (which loads the
embedding model) for contrast. The load average is printed too: on a busy machine every wall time
grows, so the median CPU time (user + system) of the process is shown beside it.

    python scripts/bench_cold_start.py --runs 10
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dcpm.api.models import AddMemoryRequest
from dcpm.config import Settings
from dcpm.service import MemoryService
from dcpm.testing.scripted_llm import LLMServer

TURNS = ["I switched from coffee to green tea", "My sister Lena is moving to Porto in spring",
         "I'm training for a 10k in June", "We adopted a rescue cat called Biscuit",
         "I've been learning Portuguese on the train", "Dad's knee surgery is booked for the 14th"]
USERS = ("ana", "ben", "chloe")


def fill(data_dir: Path) -> str:
    """Each user's turns, the first few extracted into items; returns one item's id."""
    with LLMServer() as llm:
        service = MemoryService(Settings(data_dir=data_dir, llm_base_url=llm.url, llm_model="scripted"), lazy=True)
        try:
            item_id = ""
            for user in USERS:
                for n, text in enumerate(TURNS * 3):
                    added = service.add_memory(AddMemoryRequest(user_id=user, infer=n < 3,
                                                                messages=[{"content": f"{text} (#{n})"}]))
                    item_id = item_id or next((op.id for op in added.operations if op.op == "ADD"), "")
        finally:
            service.close()
    return item_id


def cpu_seconds() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed_runs(argv: list[str], runs: int, env: dict[str, str]) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of each of `runs` fresh processes."""
    wall, cpu = [], []
    for _ in range(runs):
        started, cpu_before = time.perf_counter(), cpu_seconds()
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall.append(time.perf_counter() - started)
        cpu.append(cpu_seconds() - cpu_before)
    return wall, cpu


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per command")
    parser.add_argument("--search-runs", type=int, default=3, help="fresh processes for `dcpm search`")
    args = parser.parse_args()
    script = Path(sys.executable).with_name("dcpm")
    dcpm = [str(script)] if script.exists() else [sys.executable, "-m", "dcpm.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        item_id = fill(data_dir)
        env = {k: v for k, v in os.environ.items() if not k.startswith("DCPM_")}
        env.update({"DCPM_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1"})
        commands = [("python -c pass", [sys.executable, "-c", "pass"], args.runs)]
        for words in (["--help"], ["users"], ["items", "ana"], ["show", item_id], ["history", item_id],
                      ["events", "ana"], ["runs"], ["graph", "ana"], ["keys", "list"], ["health"], ["config", "show"]):
            commands.append((f"dcpm {' '.join(words).replace(item_id, 'ID')}", dcpm + words, args.runs))
        commands.append(("dcpm search ana 'what does ana drink'", dcpm + ["search", "ana", "what does ana drink"],
                         args.search_runs))
        load = os.getloadavg()[0]
        rows = [(name, *timed_runs(argv, runs, env)) for name, argv, runs in commands]
    print(f"Cold start without a daemon, {os.cpu_count()} CPUs, load average {load:.1f} at the start, "
          f"Python {sys.version.split()[0]}\n")
    print("| command | runs | median s | p90 s | median CPU s |")
    print("|---|---:|---:|---:|---:|")
    for name, wall, cpu in rows:
        print(f"| `{name}` | {len(wall)} | {statistics.median(wall):.2f} | {p90(wall):.2f} | "
              f"{statistics.median(cpu):.2f} |")


if __name__ == "__main__":
    main()
