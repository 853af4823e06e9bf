"""HTTP phase of the scale benchmark: real `dcpm serve` subprocesses on one PostgreSQL 16
(pgserver) with the pgvector index, searched by 1, 4 and 16 concurrent clients, first through
one daemon, then through three (client k talks to daemon k mod 3). The store is written through
the import path (`POST /v1/import`, no extraction) with synthetic sentences; unlike the index
phase, the daemons embed them and every search embeds its query with the real model, as a
deployment does."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from bench_consolidation import synthetic_facts

from dcpm.api.client import Client
from dcpm.config import Settings
from dcpm.domain import Turn
from dcpm.testing.daemon import free_port, not_ready

QUESTIONS = ["what does {} do for exercise", "where did {} go running", "what did {} cook recently",
             "how is work going for {}", "what happened with money for {}", "how is the family of {}",
             "what is growing in the garden of {}", "when does {} swim", "who did {} call", "what did {} bake"]


class Daemon:
    """One `dcpm serve` on the shared PostgreSQL, with a data directory of its own."""

    def __init__(self, workdir: Path, database_url: str, number: int):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data_dir = workdir / f"daemon-{number}"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log = workdir / f"daemon-{number}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("DCPM_")}
        env.update({"DCPM_DATA_DIR": str(self.data_dir), "DCPM_DATABASE_URL": database_url,
                    "DCPM_INDEX_BACKEND": "pgvector", "DCPM_CONSOLIDATION_SCHEDULE": "false",
                    "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
        with open(self.log, "w") as handle:
            self.process = subprocess.Popen([sys.executable, "-m", "dcpm.cli", "serve", "--port", str(self.port),
                                             "--log-level", "warning"], env=env, stdout=handle,
                                            stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 300) -> None:
        problem = not_ready(self.process, self.url, self.log, timeout, poll=0.5)
        if problem:
            raise SystemExit(problem)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()


def user_turns(users: int, memories: int, seed: int) -> dict[str, list[Turn]]:
    texts = synthetic_facts(memories, seed)
    turns: dict[str, list[Turn]] = {f"http-user-{u:02d}": [] for u in range(users)}
    for n, (text, _) in enumerate(texts):
        user_id = f"http-user-{n % users:02d}"
        turns[user_id].append(Turn(text=text, speaker="Sam", session_id=f"s{n // 500}",
                                   id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"bench/{user_id}/{n}"))))
    return turns


def import_store(url: str, turns: dict[str, list[Turn]]) -> float:
    client = Client(url, timeout=600)
    batch = Settings().import_batch_size  # what `dcpm import` sends per request
    started = time.perf_counter()
    for user_id, said in turns.items():
        for first in range(0, len(said), batch):
            client.import_turns(user_id, said[first:first + batch])
    return time.perf_counter() - started


def hammer(urls: list[str], users: list[str], clients: int, seconds: float) -> dict[str, Any]:
    """`clients` threads searching back to back for `seconds`; client k uses daemon k mod len(urls)."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    server_ms: list[list[float]] = [[] for _ in range(clients)]  # the daemon's own took_ms
    errors = [0] * clients
    stop = time.monotonic() + seconds

    def client(k: int) -> None:
        rng = np.random.default_rng(k)
        with httpx.Client(base_url=urls[k % len(urls)], timeout=60) as http:
            while time.monotonic() < stop:
                user = users[int(rng.integers(len(users)))]
                body = {"user_id": user, "query": QUESTIONS[int(rng.integers(len(QUESTIONS)))].format("Sam"),
                        "limit": 10}
                started = time.perf_counter()
                try:
                    response = http.post("/v1/search", json=body)
                    ok = response.status_code == 200
                except httpx.HTTPError:
                    ok = False
                if ok:
                    latencies[k].append(time.perf_counter() - started)
                    server_ms[k].append(response.json()["took_ms"])
                else:
                    errors[k] += 1

    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    done = np.array([x for per in latencies for x in per])
    took = np.array([x for per in server_ms for x in per])
    return {"daemons": len(urls), "clients": clients, "requests": len(done), "errors": int(sum(errors)),
            "seconds": wall, "throughput": len(done) / wall,
            "p50_ms": float(np.percentile(done, 50) * 1000) if len(done) else None,
            "p95_ms": float(np.percentile(done, 95) * 1000) if len(done) else None,
            "server_p50_ms": float(np.percentile(took, 50)) if len(took) else None}


def run(memories: int, users: int, seconds: float, client_counts: list[int], seed: int,
        workdir: Path | None = None) -> dict[str, Any]:
    from dcpm.testing import postgres

    with ExitStack() as stack:
        root = workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-http-")))
        server = postgres.start(root / "pgdata")
        stack.callback(server.cleanup)  # before the directory goes
        database_url = postgres.create_database(server, "bench")
        first = Daemon(root, database_url, 0)  # alone first: it migrates the new database
        stack.callback(first.stop)
        first.wait_ready()
        turns = user_turns(users, memories, seed)
        import_s = import_store(first.url, turns)
        print(f"  http: imported {memories:,} memories in {import_s:.0f}s", flush=True)
        others = [Daemon(root, database_url, n) for n in (1, 2)]
        for daemon in others:
            stack.callback(daemon.stop)
        for daemon in others:
            daemon.wait_ready()
        rounds = []
        for fleet in ([first], [first, *others]):
            hammer([d.url for d in fleet], list(turns), 1, 2.0)  # warm-up: models loaded, pools filled
            for clients in client_counts:
                rounds.append(hammer([d.url for d in fleet], list(turns), clients, seconds))
                print(f"  http: {len(fleet)} daemon(s), {clients} clients: {rounds[-1]['throughput']:.1f} req/s",
                      flush=True)
        return {"memories": memories, "users": users, "import_s": import_s, "import_rate": memories / import_s,
                "rounds": rounds}
