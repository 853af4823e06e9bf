"""System 2 against a scripted OpenAI-compatible server: Ana runs before work and bakes sourdough."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import timedelta

import pytest
from sqlalchemy import select

from dcpm.api.models import ConsentUpdate, SearchRequest
from dcpm.consolidation import runs as runs_module
from dcpm.consolidation.runs import consolidate_user
from dcpm.service import MemoryService
from dcpm.store import leases
from dcpm.store.items import NewItem, add_item
from dcpm.store.models import ConsolidationRun, Evidence, Lease, Node, utcnow
from dcpm.testing.scripted_llm import LLMServer
from dcpm.write.raw import touch_user

from .scenarios import at

pytestmark = pytest.mark.storage  # these run on SQLite and on PostgreSQL (tests/conftest.py)

RUNNING = ["Ana goes running before work every weekday morning",
           "Ana went running along the canal before work on Monday",
           "Ana goes running before work even when it rains",
           "Ana joined a running club that meets before work on Thursdays"]
BAKING = ["Ana bakes sourdough bread every Saturday", "Ana baked a sourdough loaf with rye flour on Saturday",
          "Ana feeds her sourdough starter on Friday night so she can bake bread on Saturday",
          "Ana gave a sourdough loaf she baked to her neighbour"]
MORE_RUNNING = ["Ana went running before work on Tuesday morning", "Ana went running before work on Wednesday morning",
                "Ana went running before work on Friday morning"]
SCHEMA_TEXT = {"fitness": "Ana sticks rigidly to her marathon training schedule",
               "food": "Ana tracks every penny in her monthly budget"}


def habit_agent(prompt: str) -> list[tuple[str, dict]]:
    """Reuse a nearby node of the cluster's domain when one is shown, else create a schema."""
    facts = re.findall(r"^\[(f\d+)\] \((\w+)\)", prompt, re.MULTILINE)
    nodes = re.findall(r"^\[(n\d+)\] schema \((\w+)\)", prompt, re.MULTILINE)
    domain = facts[0][1]
    handles = [f for f, _ in facts]
    same = [n for n, d in nodes if d == domain]
    if same:
        return [("add_evidence", {"node": same[0], "evidence": handles})]
    return [("create_schema", {"ref": "s1", "domain": domain, "text": SCHEMA_TEXT[domain], "evidence": handles})]


@pytest.fixture
def llm():
    with LLMServer() as server:
        server.script.induce = habit_agent
        server.script.behaviour = lambda prompt: "keeps a strict plan and follows it to the letter"
        server.script.core_schema = lambda prompt: "Ana runs her life by plans she never breaks"
        yield server


@pytest.fixture
def svc(settings, embedder, llm):
    settings.llm_base_url, settings.llm_model, settings.llm_retry_base_seconds = llm.url, "scripted", 0.01
    service = MemoryService(settings, embedder=embedder)
    yield service
    service.close()


def remember(svc, texts, topic, user="ana"):
    with svc.db.session() as session:
        touch_user(session, user)
        items = [add_item(session, user, NewItem("fact", t, valid_from=at(2025, 3, 1), topic=topic)) for t in texts]
    svc.writer.index_rows(items=items)
    return [i.id for i in items]


def nodes(svc, user="ana", kind="schema"):
    with svc.db.session() as session:
        found = list(session.scalars(select(Node).where(Node.user_id == user, Node.kind == kind)))
        evidence = {n.id: set(session.scalars(select(Evidence.item_id).where(Evidence.node_id == n.id))) for n in found}
    return found, evidence


def consolidate(svc, user="ana"):
    return consolidate_user(svc.consolidation.backends, user)


def test_two_domains_give_one_schema_each_with_its_evidence(svc):
    running, baking = remember(svc, RUNNING, "fitness"), remember(svc, BAKING, "food")
    report = consolidate(svc)
    assert report.status == "done" and report.counts["clusters"] == 2
    assert report.llm_calls["triage"] == 0 and report.llm_calls["induce"] == 2
    found, evidence = nodes(svc)
    assert sorted(evidence[n.id] == set(running) or evidence[n.id] == set(baking) for n in found) == [True, True]
    assert {n.domain for n in found} == {"fitness", "food"}


def test_second_night_adds_evidence_to_the_existing_schema(svc):
    running = remember(svc, RUNNING, "fitness")
    consolidate(svc)
    later = remember(svc, MORE_RUNNING, "fitness")
    second = consolidate(svc)
    assert second.counts["fresh_items"] == 3 and second.counts["nodes_created"] == 0
    found, evidence = nodes(svc)
    assert len(found) == 1 and evidence[found[0].id] == set(running + later)


def test_colliding_schemas_yield_one_core_schema_only_after_consent(svc, llm):
    running, baking = remember(svc, RUNNING, "fitness"), remember(svc, BAKING, "food")
    first = consolidate(svc)
    assert "skipped" in first.counts["sweep"] and nodes(svc, kind="core_schema")[0] == []
    svc.consent("ana", ConsentUpdate(core_schemas=True))
    second = consolidate(svc)
    assert second.counts["collision_groups"] == 1 and second.counts["core_schemas_created"] == 1
    consolidate(svc)  # repeating is safe
    core, evidence = nodes(svc, kind="core_schema")
    assert len(core) == 1 and evidence[core[0].id] == set(running + baking)
    graph = svc.graph("ana")
    assert sorted(e.type for e in graph.edges) == ["abstracts", "abstracts"]


def test_a_crash_between_phases_resumes_without_duplicate_nodes(svc, monkeypatch):
    remember(svc, RUNNING, "fitness"), remember(svc, BAKING, "food")
    svc.consent("ana", ConsentUpdate(core_schemas=True))
    real_sweep = runs_module.sweep

    def crash(*args, **kwargs):
        raise SystemExit("power cut between phase 2 and phase 3")

    monkeypatch.setattr(runs_module, "sweep", crash)
    with pytest.raises(SystemExit):
        consolidate(svc)
    with svc.db.session() as session:  # what a kill -9 leaves behind: a run still marked running
        session.get(ConsolidationRun, session.scalars(select(ConsolidationRun.id)).one()).status = "running"
    monkeypatch.setattr(runs_module, "sweep", real_sweep)
    resumed = consolidate(svc)
    assert resumed.status == "done" and resumed.counts["clusters"] == 0
    assert len(nodes(svc)[0]) == 2 and len(nodes(svc, kind="core_schema")[0]) == 1
    statuses = sorted(r.status for r in svc.runs("ana"))
    assert statuses == ["done", "interrupted"]


def test_a_run_whose_process_died_is_listed_interrupted_at_once_and_a_live_one_running(svc):
    """`dcpm runs` after a kill -9 of `dcpm consolidate`: the dead run's lease is still in the
    store (until it expires or a daemon starts), yet it is not shown as running."""
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead, alive = f"{leases.HOST}:{int(finished.stdout)}:dead", f"{leases.HOST}:{os.getpid()}:live"
    with svc.db.session() as session:
        for user, holder in (("ana", dead), ("bob", alive)):
            touch_user(session, user)
            session.add(ConsolidationRun(user_id=user, dry_run=False, holder=holder, counts={}, started_at=utcnow()))
            session.add(Lease(name=leases.consolidation_lease(user), holder=holder,
                              expires_at=utcnow() + timedelta(minutes=10)))
    assert [r.status for r in svc.runs("ana")] == ["interrupted"]
    assert [r.status for r in svc.runs("bob")] == ["running"]
    with svc.db.session() as session:  # bob's holder lost its lease (it expired, another took it over)
        session.get(Lease, leases.consolidation_lease("bob")).holder = f"{leases.HOST}:{os.getpid()}:other"
    assert [r.status for r in svc.runs("bob")] == ["interrupted"]


def test_invalid_tool_calls_are_refused_and_logged(svc, llm):
    remember(svc, RUNNING, "fitness")
    bob_fact = remember(svc, ["Bob keeps pigeons"], "pets", user="bob")[0]
    llm.script.induce = lambda prompt: [
        ("add_evidence", {"node": "n7", "evidence": ["f1"]}),
        ("create_schema", {"ref": "s1", "domain": "fitness", "text": "Ana runs before work", "evidence": [bob_fact]}),
        ("create_schema", {"ref": "s2", "domain": "fitness", "text": "Ana runs before work", "evidence": ["f1", "f2"]}),
        ("add_edge", {"source": "s2", "target": "s2", "type": "supports"}),
        ("launch_rockets", {}),
    ]
    report = consolidate(svc)
    assert len(report.errors) == 4 and all(e.startswith("refused") for e in report.errors)
    assert any("unknown node" in e for e in report.errors) and any("unknown fact" in e for e in report.errors)
    found, evidence = nodes(svc)
    assert len(found) == 1 and bob_fact not in evidence[found[0].id]
    assert svc.runs("ana")[0].errors == report.errors


def test_search_surfaces_the_schema_of_a_hit_fact(svc):
    remember(svc, RUNNING, "fitness"), remember(svc, BAKING, "food")
    consolidate(svc)
    result = svc.search(SearchRequest(user_id="ana", query="running club on Thursdays", kinds=["fact"]))
    assert result.nodes[0].text == SCHEMA_TEXT["fitness"]
    assert result.hits[0].id in result.nodes[0].matched_evidence
    assert SCHEMA_TEXT["fitness"] in result.context


def test_switching_a_layer_off_hides_it_from_search_at_once(svc):
    remember(svc, RUNNING, "fitness")
    consolidate(svc)
    query = SearchRequest(user_id="ana", query="running before work", kinds=["fact"])
    assert svc.search(query).nodes
    svc.consent("ana", ConsentUpdate(schemas=False))
    assert svc.search(query).nodes == []


def test_dry_run_reports_clusters_without_llm_or_writes(svc, llm):
    remember(svc, RUNNING, "fitness"), remember(svc, BAKING, "food")
    report = consolidate_user(svc.consolidation.backends, "ana", dry_run=True)
    assert report.counts["cluster_sizes"] == [4, 4] and llm.script.calls == []
    assert nodes(svc)[0] == []


def test_show_a_node_with_its_evidence_and_filter_items(svc):
    running = remember(svc, RUNNING, "fitness")
    remember(svc, BAKING, "food")
    consolidate(svc)
    node_id = next(n.id for n in svc.graph("ana").nodes if n.domain == "fitness")
    node = svc.node(node_id)
    assert node.text == SCHEMA_TEXT["fitness"] and sorted(e.id for e in node.evidence) == sorted(running)
    assert svc.list_memories("ana", topic="food").total == len(BAKING)
    assert svc.list_memories("ana", status="superseded").total == 0
    assert svc.list_memories("ana", status="current", topic="fitness").total == len(RUNNING)
