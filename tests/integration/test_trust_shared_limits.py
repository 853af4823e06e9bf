"""Limits every tenant shares, which one key must not be able to use against the others: the
waiting slots for adds. Ana's and Bob's assistants hold a key each."""

from __future__ import annotations

import threading
import time

import httpx

from dcpm.server.app import create_app
from dcpm.service import MemoryService
from dcpm.testing.scripted_llm import LLMServer

from .served import served

BEES = "Ana keeps bees on her allotment"


# --- waiting slots: one user's flood of adds leaves slots to the others ----------------------------

def test_while_ana_floods_the_daemon_with_adds_bob_still_gets_his_extraction_at_once(settings, embedder):
    with LLMServer() as llm:
        llm.script.slow_seconds = 5.0
        llm.script.faults.append("slow")  # Ana's first add holds its waiting slot that long
        settings.llm_base_url, settings.llm_model, settings.llm_timeout = llm.url, "scripted", 30.0
        settings.max_waiting_adds = 2  # one user holds at most one of them (a quarter, at least one)
        service = MemoryService(settings, embedder=embedder)
        try:
            with served(create_app(service)) as url:
                first: list[httpx.Response] = []
                waiting = threading.Thread(target=lambda: first.append(httpx.post(
                    f"{url}/v1/memories", json={"user_id": "ana", "text": BEES}, timeout=60)))
                waiting.start()
                while not llm.script.calls:
                    time.sleep(0.05)
                flood = httpx.post(f"{url}/v1/memories", json={"user_id": "ana", "text": "Ana sells honey"},
                                   timeout=60)
                assert flood.status_code == 202 and flood.json()["status"] == "pending"  # stored, extracted later
                bob = httpx.post(f"{url}/v1/memories", json={"user_id": "bob", "text": "Bob plays the cello"},
                                 timeout=60)
                assert bob.status_code == 201 and bob.json()["status"] == "done"
                waiting.join()
                assert first[0].status_code == 201 and first[0].json()["status"] == "done"
        finally:
            service.close()
