"""Scale-out, end to end: three `dcpm serve` daemons and two consolidation workers on one PostgreSQL
with the pgvector index, one scripted LLM for all. Twenty users' assistants add 400 turns spread
over the daemons; one daemon is killed with SIGKILL mid-burst, while a turn it acknowledged (202)
is being extracted, and is not restarted. Afterwards every acknowledged turn is processed exactly
once, every chain is one line with one head, any daemon finds what any other stored, the workers
never consolidate one user at once, and a hard delete through one daemon leaves nothing the
others can find."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise

import httpx
import pytest

from dcpm.testing.scripted_llm import LLMServer, ScriptedLLM

from .daemon import Daemon, dcpm_env
from .fleet import Store, Trap, chain_faults, revise_home, turns

pytestmark = pytest.mark.timeout(420)

DAEMONS = 3
VICTIM = 1  # the daemon killed mid-burst; never restarted: the others recover what it acknowledged
CLIENTS = 12
STORY = turns()
TRAPPED = next(t for t in STORY[len(STORY) // 2:] if t.number % DAEMONS == VICTIM and t.number % 2)  # a 202 add


def fleet_env(database_url: str, llm_url: str) -> dict[str, str]:
    return {"DCPM_DATABASE_URL": database_url, "DCPM_INDEX_BACKEND": "pgvector", "DCPM_LLM_BASE_URL": llm_url,
            "DCPM_LLM_MODEL": "scripted", "DCPM_LLM_TIMEOUT": "30", "DCPM_RECOVERY_INTERVAL_SECONDS": "0.5",
            "DCPM_WRITER_LEASE_SECONDS": "15", "DCPM_CONSOLIDATION_SCHEDULE": "false",
            "DCPM_CONSOLIDATION_LEASE_SECONDS": "15"}


class Burst:
    """The assistants: each turn goes to daemon `number % 3`, or to a live one once that died. A
    turn whose request was cut off by the kill is sent again; it may then be stored twice (the
    API has no idempotency key), so such turns are remembered as `cut_off`."""

    def __init__(self, daemons: list[Daemon], trap: Trap, store: Store):
        self.daemons, self.trap, self.store = daemons, trap, store
        self.pending_at_kill: set[str] = set()
        self.kill_failed: AssertionError | OSError | None = None
        self.alive = list(range(DAEMONS))
        self.acknowledged: dict[int, tuple[int, list[str]]] = {}  # turn -> (daemon, raw ids)
        self.cut_off: set[int] = set()
        self.lock = threading.Lock()

    def send(self, number: int) -> None:
        turn = STORY[number]
        body = {"user_id": turn.user_id, "messages": [{"content": turn.text, "name": turn.speaker}],
                "wait": number % 2 == 0}  # odd turns do not wait: extraction runs after the answer
        for attempt in range(10):
            with self.lock:
                target = number % DAEMONS if number % DAEMONS in self.alive else self.alive[attempt % len(self.alive)]
            try:
                response = httpx.post(f"{self.daemons[target].url}/v1/memories", json=body, timeout=120)
            except httpx.ConnectError:  # nothing was sent: the daemon is gone
                continue
            except httpx.TransportError:  # sent, no answer: stored or not, nobody knows
                with self.lock:
                    self.cut_off.add(number)
                continue
            assert response.status_code in (201, 202), response.text
            with self.lock:
                self.acknowledged[number] = (target, response.json()["raw_ids"])
            return
        raise AssertionError(f"turn {number} was never acknowledged")

    def kill_victim_when_trapped(self) -> None:
        try:
            self._kill_victim()
        except (AssertionError, OSError) as exc:  # raised again by the test, not lost in this thread
            self.kill_failed = exc
        finally:
            self.trap.sprung.set()

    def _kill_victim(self) -> None:
        assert self.trap.caught.wait(180), "nobody started extracting the trapped turn"
        deadline = time.monotonic() + 30
        while TRAPPED.number not in self.acknowledged and time.monotonic() < deadline:  # its 202 is on its way
            time.sleep(0.05)
        with self.lock:
            self.alive.remove(VICTIM)
        victim = self.daemons[VICTIM].process
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait()  # reaped: its pid is gone, so the others may take its leases at once
        self.pending_at_kill = {raw for (raw,) in self.store.rows("select id from raw_inputs where status = 'pending'")}


def wait_until_processed(store: Store, raw_ids: set[str], seconds: float) -> float:
    started = time.monotonic()
    while True:
        pending = store.one("select count(*) from raw_inputs where status = 'pending'")
        stored = store.one("select count(*) from raw_inputs where id = any(:ids)", ids=list(raw_ids))
        if not pending and stored == len(raw_ids):
            return time.monotonic() - started
        assert time.monotonic() - started < seconds, f"{pending} inputs still pending after {seconds}s"
        time.sleep(0.5)


def search(daemon: Daemon, user_id: str, query: str, limit: int = 10) -> list[dict]:
    response = httpx.post(f"{daemon.url}/v1/search", json={"user_id": user_id, "query": query, "limit": limit,
                                                           "threshold": 0}, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()["hits"]


def found_ids(hits: list[dict]) -> set[str]:
    return {hit["id"] for hit in hits} | {hit["source"]["id"] for hit in hits if hit.get("source")}


def consolidate_with_two_workers(tmp_path, env: dict[str, str]) -> list[dict]:
    """`dcpm consolidate --all` started twice at once, as cron on two hosts would."""
    workers = [subprocess.Popen([sys.executable, "-m", "dcpm.cli", "consolidate", "--all", "--json"],
                                env=dcpm_env(tmp_path / f"worker{n}", **env), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for n in range(2)]
    started = time.monotonic()
    results = [worker.communicate(timeout=240) for worker in workers]
    print(f"consolidation: two workers took {time.monotonic() - started:.1f}s, start-up included")
    for worker, (out, err) in zip(workers, results):
        assert worker.returncode == 0, err
    return [json.loads(out) for out, _ in results]


def test_three_daemons_and_two_workers_on_one_postgresql_survive_a_kill_9_and_agree(tmp_path, postgres_url):
    trap = Trap(TRAPPED.text)
    with LLMServer(ScriptedLLM(extract=trap.extract, reconcile=revise_home)) as llm:
        env = fleet_env(postgres_url, llm.url)
        daemons = [Daemon(tmp_path / f"daemon{n}", **env) for n in range(DAEMONS)]
        store = Store(postgres_url)
        try:
            started = time.monotonic()
            with ThreadPoolExecutor(DAEMONS) as pool:  # started together: they create the pgvector tables
                list(pool.map(lambda daemon: daemon.start(timeout=180), daemons))
            up = time.monotonic() - started
            burst = Burst(daemons, trap, store)
            killer = threading.Thread(target=burst.kill_victim_when_trapped)
            killer.start()
            with ThreadPoolExecutor(CLIENTS) as pool:
                list(pool.map(burst.send, range(len(STORY))))
            killer.join()
            assert burst.kill_failed is None, burst.kill_failed
            burst_seconds = time.monotonic() - started - up
            raw_ids = {raw_id for _, ids in burst.acknowledged.values() for raw_id in ids}
            recovered_in = wait_until_processed(store, raw_ids, 150)
            alive = [daemons[n] for n in burst.alive]
            print(f"\nscale-out: daemons up in {up:.1f}s; {len(STORY)} adds in {burst_seconds:.1f}s; "
                  f"{len(burst.pending_at_kill)} turns pending and {len(burst.cut_off)} requests cut off at the "
                  f"kill; all processed {recovered_in:.1f}s after the burst")
            check_exactly_once(store, burst, raw_ids)
            check_chains(store)
            check_everyone_sees_everything(burst, alive)
            reports = consolidate_with_two_workers(tmp_path, env)
            check_no_user_consolidated_twice_at_once(store, reports)
            check_hard_deletes_reach_every_daemon(store, burst, alive)
            check_chains(store)
        finally:
            for daemon in daemons:
                daemon.stop()
            store.close()


def check_exactly_once(store: Store, burst: Burst, raw_ids: set[str]) -> None:
    assert len(burst.acknowledged) == len(STORY)
    assert any(daemon == VICTIM for daemon, _ in burst.acknowledged.values())
    trapped_raw = burst.acknowledged[TRAPPED.number][1]
    assert burst.acknowledged[TRAPPED.number][0] == VICTIM and trapped_raw[0] in burst.pending_at_kill
    assert store.rows("select status from raw_inputs where id = :id", id=trapped_raw[0]) == [("done",)]
    statuses = dict(store.rows("select id, status from raw_inputs"))
    assert raw_ids <= statuses.keys() and set(statuses.values()) == {"done"}
    # At most the turns cut off by the kill can have been stored twice (once before it, once re-sent).
    copies = Counter(text for (text,) in store.rows("select text from raw_inputs"))
    twice = {STORY[n].text for n in burst.cut_off}
    assert all(count == 1 or (count == 2 and said in twice) for said, count in copies.items())
    assert len(copies) == len({t.text for t in STORY})
    extracted = Counter(subject for (subject,) in store.rows("select subject_id from events where action = "
                                                             "'extracted'"))
    assert extracted.keys() == statuses.keys() and set(extracted.values()) == {1}
    # One item per turn, except that a copy of a turn is an exact duplicate of the item it made.
    items_per_turn = Counter(raw for (raw,) in store.rows("select source_raw_id from items"))
    assert set(items_per_turn.values()) == {1}
    no_item = {said for raw, said in store.rows("select id, text from raw_inputs") if raw not in items_per_turn}
    assert no_item <= twice
    per_text = Counter(said for (said,) in store.rows("select text from items"))
    assert per_text.keys() == copies.keys()
    assert all(count == 1 or (count == 2 and said in twice) for said, count in per_text.items())


def check_chains(store: Store) -> None:
    chains = store.chains()
    faults = {chain_id: chain_faults(chain) for chain_id, chain in chains.items() if chain_faults(chain)}
    assert not faults
    moves = sum(len(chain) - 1 for chain in chains.values())
    assert moves >= 40, f"only {moves} supersessions: the homes did not form chains"
    print(f"chains: {len(chains)}, {moves} supersessions")


def check_everyone_sees_everything(burst: Burst, alive: list[Daemon]) -> None:
    """Turns acknowledged by each daemon (the dead one too), searched through every live daemon."""
    sample = range(0, len(STORY), 7)
    assert {burst.acknowledged[number][0] for number in sample} == set(range(DAEMONS))
    for number in sample:
        turn, (_, raw) = STORY[number], burst.acknowledged[number]
        for daemon in alive:
            assert set(raw) & found_ids(search(daemon, turn.user_id, turn.text)), (number, daemon.url)


def check_no_user_consolidated_twice_at_once(store: Store, reports: list[dict]) -> None:
    runs = store.rows("select user_id, holder, status, started_at, finished_at from consolidation_runs "
                      "where not dry_run order by user_id, started_at")
    users = {user for (user,) in store.rows("select id from users")}
    assert {run[0] for run in runs} == users
    assert {run[2] for run in runs} == {"done"}
    for earlier, later in pairwise(runs):
        if earlier[0] == later[0]:
            assert later[3] >= earlier[4], f"two workers consolidated {later[0]} at once"
    by_worker = Counter(run[1].split(":")[1] for run in runs)
    print(f"\nconsolidation: runs per worker process {dict(by_worker)}; reports {[len(r) for r in reports]}")


def check_hard_deletes_reach_every_daemon(store: Store, burst: Burst, alive: list[Daemon]) -> None:
    first, other = alive
    # A whole user, deleted through one daemon: the other finds nothing, lists nothing.
    gone = STORY[3]
    assert store.one("select count(*) from dcpm_vectors where user_id = :u", u=gone.user_id) > 0
    response = httpx.delete(f"{first.url}/v1/users/{gone.user_id}", timeout=120)
    assert response.status_code == 200, response.text
    after = httpx.post(f"{other.url}/v1/search", json={"user_id": gone.user_id, "query": gone.text, "threshold": 0},
                       timeout=60)
    assert after.status_code == 404 or (after.status_code == 200 and after.json()["hits"] == []), after.text
    listed = httpx.get(f"{other.url}/v1/users/{gone.user_id}/items", timeout=30)
    assert listed.status_code == 404 or listed.json()["items"] == []
    assert gone.user_id not in {u["id"] for u in httpx.get(f"{other.url}/v1/users", timeout=30).json()}
    for table in ("dcpm_vectors", "dcpm_vectors_terms"):
        assert store.one(f"select count(*) from {table} where user_id = :u", u=gone.user_id) == 0
    # One belief (a user's homes, every revision), deleted through the other daemon.
    home = STORY[4 * 20 + 5]  # a "moved to" turn of user u05
    assert "moved to" in home.text
    (head,) = store.rows("select i.id from items i join items s on s.chain_id = i.chain_id "
                         "where s.source_raw_id = any(:raw) and i.superseded_by_id is null",
                         raw=burst.acknowledged[home.number][1])[0]
    response = httpx.delete(f"{other.url}/v1/items/{head}", params={"chain": "true"}, timeout=120)
    assert response.status_code == 200, response.text
    deleted = set(response.json()["deleted"]) | set(response.json()["raw_deleted"])
    assert len(deleted) >= 4
    for said in {t.text for t in STORY if t.user_id == home.user_id and " moved to " in t.text} | {home.text}:
        assert not deleted & found_ids(search(first, home.user_id, said, limit=50))
    for memory_id in deleted:
        assert httpx.get(f"{first.url}/v1/items/{memory_id}", timeout=30).status_code == 404
    assert store.one("select count(*) from dcpm_vectors where id = any(:ids)", ids=list(deleted)) == 0
    assert store.one("select count(*) from dcpm_vectors_terms where point_id = any(:ids)", ids=list(deleted)) == 0
