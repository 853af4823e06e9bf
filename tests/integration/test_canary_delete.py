"""Deleting means gone everywhere: after a hard delete, a canary string written into memories,
revisions, events and graph nodes exists nowhere in the data directory, and the vector shard
holds none of the deleted points' ids, BM25 token ids or user id."""

from __future__ import annotations

import re
import struct
import uuid
from datetime import datetime
from pathlib import Path
from typing import Iterable

import pytest

from dcpm.api.models import AddMemoryRequest, SearchRequest, UpdateMemoryRequest  # noqa: F401  (API shape)
from dcpm.consolidation.runs import consolidate_user
from dcpm.domain import Turn
from dcpm.service import MemoryService
from dcpm.store.items import update_text
from dcpm.store.models import Item
from dcpm.testing.scripted_llm import LLMServer
from dcpm.write.raw import deterministic_raw_id

CANARY = "kumquat-canary-7c1e"
KEPT = "Ana keeps bees on her allotment"


def occurrences(data_dir: Path, needle: str) -> list[str]:
    """Every file under the data directory whose bytes contain `needle`."""
    return [str(p.relative_to(data_dir)) for p in data_dir.rglob("*")
            if p.is_file() and needle.encode() in p.read_bytes()]


def shard_residue(data_dir: Path, point_ids: Iterable[str] = (), tokens: Iterable[int] = (),
                  strings: Iterable[str] = ()) -> dict[str, list[str]]:
    """What of these the vector shard's files still hold, with the files: point ids as text and as
    the 16 bytes the shard keeps, BM25 token ids as 4-byte integers in either byte order."""
    forms: dict[str, list[bytes]] = {}
    for point_id in point_ids:
        raw = uuid.UUID(point_id).bytes
        forms[f"point {point_id}"] = [point_id.encode(), raw, raw[::-1]]
    for token in tokens:
        forms[f"token {token}"] = [struct.pack("<I", token), struct.pack(">I", token)]
    for text in strings:
        forms[text] = [text.encode()]
    contents = {p: p.read_bytes() for p in (data_dir / "vectors").rglob("*") if p.is_file()}
    found = {name: sorted(str(p.relative_to(data_dir)) for p, data in contents.items() if any(f in data for f in fs))
             for name, fs in forms.items()}
    return {name: where for name, where in found.items() if where}


def only_in(embedder, deleted: Iterable[str], kept: Iterable[str]) -> set[int]:
    """BM25 token ids of the deleted texts that no kept text shares."""
    def terms(texts: list[str]) -> set[int]:
        return {i for vector in embedder.encode_documents(texts).sparse for i in vector.indices} if texts else set()
    return terms(list(deleted)) - terms(list(kept))


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
    deleted_texts = [m.text for m in svc.list_memories("ana").items + svc.list_memories("ana", kind="raw").items
                     if CANARY in m.text] + [n.text for n in svc.graph("ana").nodes]
    kept_points = [m.id for m in svc.list_memories("ana").items if CANARY not in m.text]

    chain = svc.delete_chain(item_id)
    assert len(chain.deleted) == 2 and len(chain.raw_deleted) == 2
    assert chain.nodes_reinduce and not chain.nodes_deleted  # the gift still supports the schema
    gift_query = SearchRequest(user_id="ana", query="a jar of jam for her sister", kinds=["fact", "identity"])
    assert svc.search(gift_query).nodes == []  # the node that lost evidence no longer surfaces
    last = svc.delete_memory(next(o.id for o in gift.operations if o.op == "ADD"))
    assert last.nodes_deleted == chain.nodes_reinduce and len(last.raw_deleted) == 1
    gone = chain.deleted + chain.raw_deleted + last.deleted + last.raw_deleted + last.nodes_deleted
    svc.close()

    assert occurrences(settings.data_dir, CANARY) == []
    assert occurrences(settings.data_dir, KEPT) != []  # the grep does find what was kept
    tokens = only_in(svc.embedder, deleted_texts, [KEPT, "Ana: " + KEPT, "Bob's favourite fruit is the pear"])
    assert tokens and shard_residue(settings.data_dir, gone, tokens) == {}
    assert shard_residue(settings.data_dir, kept_points) != {}  # the scan does find what was kept
    reopened = MemoryService(settings, embedder=svc.embedder)
    try:
        assert [i.text for i in reopened.list_memories("ana").items] == [KEPT]
        assert all("deleted" in e.detail or CANARY not in str(e.detail) for e in reopened.events("ana"))
    finally:
        reopened.close()


def test_deleting_a_user_leaves_no_trace_of_their_memories(svc, settings):
    user = "ana.canary-7c1e@example.org"  # user ids are often e-mail addresses
    said = remember(svc, f"Ana's locker code is {CANARY}", user=user)
    remember(svc, KEPT, user="bob")
    points = said.raw_ids + [o.id for o in said.operations]
    svc.delete_user(user)
    svc.close()
    assert occurrences(settings.data_dir, CANARY) == []
    assert occurrences(settings.data_dir, KEPT) != []
    assert occurrences(settings.data_dir, user) == []
    assert [turn for turn in said.raw_ids if occurrences(settings.data_dir, turn)] == []  # not even in the log
    tokens = only_in(svc.embedder, [f"Ana: Ana's locker code is {CANARY}"], [KEPT, "Ana: " + KEPT])
    assert tokens and shard_residue(settings.data_dir, points, tokens, [user]) == {}


def test_a_deleted_turn_leaves_no_trace_of_its_id(svc, settings):
    """`dcpm import` names a turn by a hash of what it says, who said it and when, so a row that
    kept a deleted turn's id would let anyone holding the data confirm a guess of the deleted
    text. The facts drawn from the turn stay, and so does their history, without the id."""
    first = remember(svc, "Ana makes quince jam every autumn")
    later = remember(svc, "Ana makes quince jam every autumn and sells it at the market")  # supersedes the first
    imported = Turn(text="Ana walked the Cotswold Way in nine days", speaker="Ana", timestamp=datetime(2025, 5, 1))
    imported.id = deterministic_raw_id("ana", imported, 0)
    assert svc.import_turns("ana", [imported]) == 1
    kept = remember(svc, KEPT)
    walked = next(m.id for m in svc.list_memories("ana", kind="raw").items if "Cotswold" in m.text)
    turns = first.raw_ids + later.raw_ids + [walked]
    facts = [o.id for o in first.operations + later.operations if o.op in ("ADD", "SUPERSEDE")]
    with svc.db.session() as session:  # an UPDATE the writer drew from the imported turn
        update_text(session, session.get(Item, facts[-1]), "Ana sells her quince jam at the market", raw_id=walked)
    for turn in turns:
        svc.delete_memory(turn)

    current = svc.get(facts[-1])
    assert "market" in current.text and [link.id for link in current.chain] == facts  # the beliefs stay
    assert [r.raw_id for r in current.revisions] == [None]
    history = svc.history(facts[-1]).events
    assert len(history) >= 4 and all(event.detail.get("raw_id") is None for event in history)
    assert [e.action for e in svc.events("ana")].count("deleted") == 3
    svc.close()
    for turn in turns:
        assert occurrences(settings.data_dir, turn) == [], turn
    assert shard_residue(settings.data_dir, turns) == {}
    assert occurrences(settings.data_dir, kept.raw_ids[0]) != []  # the grep does find a kept turn's id
