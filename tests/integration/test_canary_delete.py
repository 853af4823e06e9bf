"""Deleting means gone everywhere: after a hard delete, a canary string written into memories,
revisions, events and graph nodes exists nowhere in the data directory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dcpm.api.models import AddMemoryRequest, UpdateMemoryRequest  # noqa: F401  (UpdateMemoryRequest: API shape)
from dcpm.consolidation.runs import consolidate_user
from dcpm.service import MemoryService
from dcpm.testing.scripted_llm import LLMServer

CANARY = "kumquat-canary-7c1e"
KEPT = "Ana keeps bees on her allotment"


def occurrences(data_dir: Path, needle: str) -> list[str]:
    """Every file under the data directory whose bytes contain `needle`."""
    return [str(p.relative_to(data_dir)) for p in data_dir.rglob("*")
            if p.is_file() and needle.encode() in p.read_bytes()]


def market_supersedes_jam(items):
    """The market sentence revises the jam habit; everything else is new."""
    decisions = []
    for n, (text, shown) in enumerate(items, 1):
        jam = [handle for handle, old in shown if "every autumn" in old]
        decisions.append({"item": n, "op": "SUPERSEDE", "target": jam[0]} if jam and "market" in text
                         else {"item": n, "op": "ADD"})
    return {"decisions": decisions}


def canary_agent(prompt: str):
    handles = re.findall(rf"^\[(f\d+)\] \(\w+\) .*{CANARY}", prompt, re.MULTILINE)
    if not handles:
        return []
    return [("create_schema", {"ref": "s1", "domain": "food", "text": f"Ana plans meals around {CANARY} jam",
                               "evidence": handles})]


@pytest.fixture
def svc(settings, embedder):
    with LLMServer() as llm:
        llm.script.reconcile = market_supersedes_jam
        llm.script.induce = canary_agent
        settings.llm_base_url, settings.llm_model = llm.url, "scripted"
        settings.dbscan_min_samples = 2
        service = MemoryService(settings, embedder=embedder)
        yield service
        service.close()


def remember(svc, text, user="ana"):
    return svc.add_memory(AddMemoryRequest(user_id=user, messages=[{"content": text, "name": "Ana"}]))


def test_deleting_a_chain_leaves_no_trace_of_its_text_on_disk(svc, settings):
    remember(svc, KEPT)
    first = remember(svc, f"Ana makes {CANARY} jam every autumn")
    remember(svc, f"Ana makes {CANARY} jam every autumn and sells it at the market")  # supersedes the first
    gift = remember(svc, f"Ana gave a jar of {CANARY} jam to her sister")
    remember(svc, "Bob's favourite fruit is the pear", user="bob")
    consolidate_user(svc.consolidation.backends, "ana")
    assert svc.graph("ana").nodes and CANARY in svc.graph("ana").nodes[0].text
    svc.index.optimize()
    item_id = next(o.id for o in first.operations if o.op == "ADD")

    chain = svc.delete_chain(item_id)
    assert len(chain.deleted) == 2 and len(chain.raw_deleted) == 2
    assert chain.nodes_reinduce and not chain.nodes_deleted  # the gift still supports the schema
    last = svc.delete_memory(next(o.id for o in gift.operations if o.op == "ADD"))
    assert last.nodes_deleted == chain.nodes_reinduce and len(last.raw_deleted) == 1
    svc.close()

    assert occurrences(settings.data_dir, CANARY) == []
    assert occurrences(settings.data_dir, KEPT) != []  # the grep does find what was kept
    reopened = MemoryService(settings, embedder=svc.embedder)
    try:
        assert [i.text for i in reopened.list_memories("ana").items] == [KEPT]
        assert all("deleted" in e.detail or CANARY not in str(e.detail) for e in reopened.events("ana"))
    finally:
        reopened.close()


def test_deleting_a_user_leaves_no_trace_of_their_memories(svc, settings):
    remember(svc, f"Ana's locker code is {CANARY}")
    remember(svc, KEPT, user="bob")
    svc.delete_user("ana")
    svc.close()
    assert occurrences(settings.data_dir, CANARY) == []
    assert occurrences(settings.data_dir, KEPT) != []
