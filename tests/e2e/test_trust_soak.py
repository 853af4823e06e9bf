"""A concurrency soak: several users' assistants add, revise, edit, delete and search at the same
time against one daemon whose LLM is slow and whose writer lease is shorter than a backlog takes
to drain. Afterwards the store and the vector shard must agree, every supersedes chain must be
one line with one current head, no input may have been extracted twice, and every acknowledged
turn that nobody deleted must still be there."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor

import httpx

from dcpm.config import Settings
from dcpm.domain import EventAction
from dcpm.service import MemoryService
from dcpm.store.models import Event, Item, Node, RawInput
from dcpm.testing.scripted_llm import LLMServer, ScriptedLLM, one_fact_per_turn, supersede_first_candidate

from .daemon import Daemon, settled

USERS = {
    "ana": ["Ana drinks two espressos every morning", "Ana switched to green tea after her check-up",
            "Ana now takes her tea with a slice of ginger", "Ana's sister Lucia lives in Porto",
            "Ana is learning to make pastel de nata"],
    "bruno": ["Bruno cycles to the lab along the river", "Bruno's bike was stolen outside the station",
              "Bruno takes the tram until the new bike arrives", "Bruno is allergic to cats",
              "Bruno adopted a greyhound called Nilo"],
    "chiara": ["Chiara rents a flat in Bologna near the old tower", "Chiara moved to a bigger flat in Modena",
               "Chiara works night shifts as a paediatric nurse", "Chiara is saving for a trip to Japan",
               "Chiara postponed Japan to next spring"],
    "dev": ["Dev runs the Sunday five-a-side football", "Dev tore a ligament and stopped playing football",
            "Dev swims three mornings a week now", "Dev's daughter starts school in September",
            "Dev is vegetarian since last year"],
    "elif": ["Elif teaches chemistry at a lycée in Izmir", "Elif is writing a chemistry workbook",
             "Elif's workbook was accepted by a publisher", "Elif hates flying and takes trains",
             "Elif's cat Pamuk is fourteen"],
    "femi": ["Femi plays bass in a highlife band", "Femi sold his old bass to buy a fretless one",
             "Femi's band plays at a wedding in Lagos in May", "Femi is learning Portuguese",
             "Femi moved his rehearsals to Thursdays"],
}


def slow_extraction(turns: list[str]) -> dict:
    time.sleep(random.uniform(0.2, 0.9))  # slower in total than the writer lease, once a backlog forms
    return one_fact_per_turn(turns)


def busy_retried(call, attempts: int = 20):  # type: ignore[no-untyped-def]
    """A delete waits for the user's writer lease only as long as the lease lasts (2 s here), then
    answers 409 busy, as a client should expect under load: it tries again."""
    for _ in range(attempts):
        response = call()
        if response.status_code != 409:
            return response
        time.sleep(0.5)
    return response


def a_user_life(url: str, user: str, lines: list[str], seed: int, ledger: dict, lock: threading.Lock) -> None:
    """What one assistant does for its user: adds (some waiting, some not), searches, a manual
    edit of a current belief, and one deletion."""
    rng = random.Random(seed)
    with httpx.Client(base_url=url, timeout=120) as http:
        for number, line in enumerate(lines):
            response = http.post("/v1/memories", json={"user_id": user, "wait": rng.random() < 0.5,
                                                       "messages": [{"role": "user", "content": line}]})
            assert response.status_code in (201, 202), response.text
            with lock:
                ledger["acknowledged"][user] += response.json()["raw_ids"]
            found = http.post("/v1/search", json={"user_id": user, "query": line, "limit": 5})
            assert found.status_code == 200, found.text
            if number == 2:
                items = http.get(f"/v1/users/{user}/items", params={"status": "current"}).json()["items"]
                if items:
                    patched = http.patch(f"/v1/items/{items[0]['id']}", json={"text": items[0]["text"] + " (checked)"})
                    assert patched.status_code in (200, 404, 409, 422), patched.text
            if number == 3:
                items = http.get(f"/v1/users/{user}/items").json()["items"]
                if items:
                    deleted = busy_retried(lambda: http.delete(f"/v1/items/{rng.choice(items)['id']}"))
                    assert deleted.status_code in (200, 404), deleted.text
                    if deleted.status_code == 200:  # the listing holds turns not yet extracted too: deleting
                        with lock:                      # one by id names it in `deleted`, not `raw_deleted`
                            ledger["raw_deleted"][user] += deleted.json()["raw_deleted"] + deleted.json()["deleted"]


def test_concurrent_users_leave_a_consistent_store_index_and_chains(tmp_path):
    data_dir = tmp_path / "data"
    script = ScriptedLLM(extract=slow_extraction, reconcile=supersede_first_candidate)
    ledger = {"acknowledged": defaultdict(list), "raw_deleted": defaultdict(list)}
    lock = threading.Lock()
    with LLMServer(script) as llm:
        env = {"DCPM_LLM_BASE_URL": llm.url, "DCPM_LLM_MODEL": "scripted", "DCPM_LLM_TIMEOUT": "20",
               "DCPM_WRITER_LEASE_SECONDS": "2", "DCPM_RECOVERY_INTERVAL_SECONDS": "0.5",
               "DCPM_CONSOLIDATION_SCHEDULE": "false"}
        with Daemon(data_dir, **env) as daemon:
            with ThreadPoolExecutor(max_workers=len(USERS)) as pool:
                lives = [pool.submit(a_user_life, daemon.url, user, lines, seed, ledger, lock)
                         for seed, (user, lines) in enumerate(USERS.items())]
                for life in lives:
                    life.result()
            settled(daemon.url, list(USERS))

    service = MemoryService(Settings(data_dir=data_dir))
    try:
        with service.db.session() as session:
            raws = list(session.query(RawInput))
            items = list(session.query(Item))
            nodes = list(session.query(Node))
            extracted = Counter(e.request_id for e in session.query(Event).filter(Event.action == EventAction.EXTRACTED))
        row_ids = [r.id for r in raws] + [i.id for i in items] + [n.id for n in nodes]

        # Every row has its vector, and the shard holds nothing else.
        assert service.index.existing(row_ids) == set(row_ids)
        assert service.index.count() == len(row_ids)

        # Every chain is one line, linked both ways, with exactly one current head.
        by_chain: dict[str, list[Item]] = defaultdict(list)
        for item in items:
            by_chain[item.chain_id].append(item)
        by_id = {item.id: item for item in items}
        for chain_id, members in by_chain.items():
            heads = [m for m in members if m.superseded_by_id is None]
            assert len(heads) == 1, f"chain {chain_id} has {len(heads)} current heads"
            walked, node = [], heads[0]
            while node is not None:
                walked.append(node.id)
                older = by_id.get(node.supersedes_id) if node.supersedes_id else None
                assert older is None or older.superseded_by_id == node.id, f"chain {chain_id} is not linked both ways"
                node = older
            assert sorted(walked) == sorted(m.id for m in members), f"chain {chain_id} forked"

        # No input was extracted twice.
        assert [request for request, times in extracted.items() if times > 1] == []

        # Nothing acknowledged is lost: every acknowledged turn is stored unless a delete took it.
        stored = {r.id for r in raws}
        for user, raw_ids in ledger["acknowledged"].items():
            missing = set(raw_ids) - stored - set(ledger["raw_deleted"][user])
            assert not missing, f"{user} lost acknowledged turns {missing}"
        assert {r.status for r in raws} <= {"done", "raw"}
    finally:
        service.close()
