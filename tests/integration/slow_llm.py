"""A daemon whose LLM answers slowly, with Ana's add already waiting on it for its extraction:
where the tests of the waiting slots for adds start (test_trust_access, test_trust_shared_limits)."""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Iterator

import httpx

from dcpm.server.app import create_app
from dcpm.service import MemoryService
from dcpm.testing.scripted_llm import LLMServer

from .served import served


@contextmanager
def ana_waiting_on_a_slow_llm(settings, embedder, *, max_waiting_adds: int,
                              slow_seconds: float) -> Iterator[tuple[str, MemoryService, Future]]:
    """The daemon's URL, its service, and the answer to come to Ana's add, which holds a waiting
    slot while the LLM's first call takes `slow_seconds`; it is under way when this yields."""
    with LLMServer() as llm:
        llm.script.slow_seconds = slow_seconds
        llm.script.faults.append("slow")
        settings.llm_base_url, settings.llm_model, settings.llm_timeout = llm.url, "scripted", 30.0
        settings.max_waiting_adds = max_waiting_adds
        service = MemoryService(settings, embedder=embedder)
        try:
            with served(create_app(service)) as url, ThreadPoolExecutor(1) as pool:
                first = pool.submit(httpx.post, f"{url}/v1/memories",
                                    json={"user_id": "ana", "text": "Ana keeps bees on her allotment"}, timeout=60)
                while not llm.script.calls:
                    time.sleep(0.05)
                yield url, service, first
        finally:
            service.close()
