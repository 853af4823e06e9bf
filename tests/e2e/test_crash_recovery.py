"""kill -9 of the daemon in the middle of a burst of add_memory calls loses nothing and
processes every raw input exactly once after a restart."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from dcpm.testing.scripted_llm import LLMServer

from .daemon import Daemon

BURST = 200
KILL_AFTER = 40
USERS = 4


def rows(db_path, query: str) -> list[tuple]:
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30) as conn:
        return conn.execute(query).fetchall()


def text_of(n: int) -> str:
    return f"Note {n}: Ana booked physio session number {n} for her left knee"


def test_kill_9_during_a_burst_then_restart_loses_nothing_and_applies_each_input_once(tmp_path):
    data_dir = tmp_path / "data"
    with LLMServer() as llm:
        env = {"DCPM_LLM_BASE_URL": llm.url, "DCPM_LLM_MODEL": "scripted", "DCPM_LLM_TIMEOUT": "10",
               "DCPM_RECOVERY_INTERVAL_SECONDS": "0.5"}
        daemon = Daemon(data_dir, **env).start()
        acknowledged: dict[int, list[str]] = {}
        killed = threading.Event()
        lock = threading.Lock()

        def send(n: int, url: str) -> None:
            if killed.is_set():
                return
            # Half the callers do not wait for extraction, so the kill leaves work in the background.
            body = {"user_id": f"user{n % USERS}", "messages": [{"content": text_of(n), "name": "Ana"}],
                    "wait": n % 2 == 1}
            try:
                response = httpx.post(f"{url}/v1/memories", json=body, timeout=60)
            except httpx.HTTPError:
                return
            assert response.status_code in (201, 202), response.text
            with lock:
                acknowledged[n] = response.json()["raw_ids"]
                if len(acknowledged) >= KILL_AFTER and not killed.is_set():
                    killed.set()
                    os.kill(daemon.process.pid, signal.SIGKILL)

        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(lambda n: send(n, daemon.url), range(BURST)))
        daemon.process.wait()
        db_path = data_dir / "dcpm.db"
        stored_at_crash = rows(db_path, "select count(*) from raw_inputs")[0][0]
        pending_at_crash = rows(db_path, "select count(*) from raw_inputs where status = 'pending'")[0][0]

        started = time.monotonic()  # includes the daemon's start-up (model load, index check)
        with Daemon(data_dir, **env) as restarted:
            deadline = started + 240
            while rows(db_path, "select count(*) from raw_inputs where status = 'pending'")[0][0]:
                assert time.monotonic() < deadline, "recovery loop did not finish the pending inputs"
                time.sleep(0.2)
            recovery_seconds = time.monotonic() - started
            # The client re-sends what it never got an answer for; nothing may be applied twice.
            missing = [n for n in range(BURST) if n not in acknowledged]
            with ThreadPoolExecutor(max_workers=8) as pool:
                list(pool.map(lambda n: send_again(n, restarted.url, acknowledged, lock), missing))
            while rows(db_path, "select count(*) from raw_inputs where status = 'pending'")[0][0]:
                assert time.monotonic() < deadline
                time.sleep(0.5)

    print(f"\ncrash test: {len(acknowledged)} of {BURST} acknowledged; {stored_at_crash} raw inputs on disk at the "
          f"kill, {pending_at_crash} of them pending; the restarted daemon had processed them "
          f"{recovery_seconds:.1f}s after its start")
    raw_ids = {raw_id for ids in acknowledged.values() for raw_id in ids}
    assert len(acknowledged) == BURST
    on_disk = dict(rows(db_path, "select id, status from raw_inputs"))
    assert raw_ids <= on_disk.keys()  # every acknowledged input is there
    assert set(on_disk.values()) == {"done"}
    extracted = rows(db_path, "select subject_id, count(*) from events where action = 'extracted' group by subject_id")
    assert all(count == 1 for _, count in extracted) and len(extracted) == len(on_disk)
    per_text = rows(db_path, "select text, count(*) from items group by text")
    assert len(per_text) == BURST and all(count == 1 for _, count in per_text)
    broken = rows(db_path, """select count(*) from items a left join items b on a.superseded_by_id = b.id
                             where a.superseded_by_id is not null and (b.id is null or b.supersedes_id != a.id)""")
    assert broken == [(0,)]


def send_again(n: int, url: str, acknowledged: dict, lock: threading.Lock) -> None:
    body = {"user_id": f"user{n % USERS}", "messages": [{"content": text_of(n), "name": "Ana"}]}
    response = httpx.post(f"{url}/v1/memories", json=body, timeout=120)
    assert response.status_code in (201, 202), response.text
    with lock:
        acknowledged[n] = response.json()["raw_ids"]
