"""Findings 6 and 14: consolidation re-induces or removes nodes that lost evidence to a delete,
never leaves a node without evidence, tolerates deletes during a run, and one user's failure
does not stop the run for the others."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from dcpm.api.models import ConsentUpdate, SearchRequest
from dcpm.consolidation import runs as runs_module
from dcpm.consolidation import triage as triage_module
from dcpm.consolidation.runs import run_consolidation
from dcpm.store.models import Event

from .test_consolidation import BAKING, RUNNING, consolidate, habit_agent, llm, nodes, remember, svc  # noqa: F401

pytestmark = pytest.mark.storage  # these run on SQLite and on PostgreSQL (tests/conftest.py)

THURSDAYS = SearchRequest(user_id="ana", query="running club on Thursdays", kinds=["fact"])


def events_of(svc, subject_id):
    with svc.db.session() as session:
        return list(session.scalars(select(Event).where(Event.subject_id == subject_id)))


def test_a_node_that_lost_evidence_is_reinduced_from_what_is_left(svc):
    running = remember(svc, RUNNING, "fitness")
    consolidate(svc)
    (old,), _ = nodes(svc)
    svc.delete_memory(running[0])
    assert svc.search(THURSDAYS).nodes == []  # hidden until consolidation has re-induced it
    report = consolidate(svc)
    (new,), evidence = nodes(svc)
    assert report.status == "done" and report.counts["nodes_reinduced"] == 1
    assert new.id != old.id and new.status == "active" and evidence[new.id] == set(running[1:])
    assert svc.search(THURSDAYS).nodes[0].id == new.id
    assert not svc.index.existing([old.id]) and all(e.detail == {"deleted": True} for e in events_of(svc, old.id))


def test_a_node_left_with_too_little_evidence_is_removed(svc):
    running = remember(svc, RUNNING, "fitness")
    consolidate(svc)
    (old,), _ = nodes(svc)
    svc.delete_memory(running[0])
    svc.delete_memory(running[1])
    report = consolidate(svc)
    assert report.counts["nodes_removed"] == 1 and report.counts["fresh_items"] == 2
    assert nodes(svc)[0] == [] and not svc.index.existing([old.id])
    assert all(e.detail == {"deleted": True} for e in events_of(svc, old.id))


def test_a_node_is_never_created_without_evidence(svc, llm):
    remember(svc, RUNNING, "fitness")
    llm.script.induce = lambda prompt: [("create_schema", {"ref": "s1", "domain": "fitness",
                                                           "text": "Ana runs", "evidence": []})]
    report = consolidate(svc)
    assert nodes(svc)[0] == [] and any("evidence" in e for e in report.errors)


def test_the_agent_cannot_cite_a_memory_of_the_user_it_was_not_shown(svc, llm):
    running, baking = remember(svc, RUNNING, "fitness"), remember(svc, BAKING, "food")

    def agent(prompt: str):  # cites, in the running cluster, a baking fact by its id (as an injected text might)
        calls = habit_agent(prompt)
        if "running" in prompt:
            calls[0][1]["evidence"] = [*calls[0][1]["evidence"], baking[0]]
        return calls

    llm.script.induce = agent
    report = consolidate(svc)
    _, evidence = nodes(svc)
    assert not any(baking[0] in shown and set(running) & shown for shown in evidence.values())
    assert any("unknown fact" in e for e in report.errors)


def test_items_deleted_while_triage_runs_do_not_break_the_run(svc, monkeypatch):
    running = remember(svc, RUNNING, "fitness")
    fresh_items = triage_module.fresh_items

    def and_meanwhile_a_delete(db, user_id):
        found = fresh_items(db, user_id)
        svc.delete_memory(running[0])
        return found

    monkeypatch.setattr(triage_module, "fresh_items", and_meanwhile_a_delete)
    report = consolidate(svc)
    assert report.status == "done"
    (node,), evidence = nodes(svc)
    assert evidence[node.id] == set(running[1:])


def test_a_fact_deleted_while_the_agent_thinks_is_left_out_of_the_node(svc, llm):
    running = remember(svc, RUNNING, "fitness")

    def agent(prompt):
        svc.delete_memory(running[1])  # the user deletes a fact during the LLM call
        return habit_agent(prompt)

    llm.script.induce = agent
    report = consolidate(svc)
    (node,), evidence = nodes(svc)
    assert report.status == "done" and evidence[node.id] == set(running) - {running[1]}


def test_a_schema_deleted_during_the_sweep_is_skipped(svc, llm):
    remember(svc, RUNNING, "fitness"), remember(svc, BAKING, "food")
    svc.consent("ana", ConsentUpdate(core_schemas=True))

    def describe(prompt):
        victim = next(n for n in svc.graph("ana").nodes if n.text in prompt)
        svc.delete_node(victim.id)  # deleted while its behaviour is being described
        return "keeps a strict plan and follows it to the letter"

    llm.script.behaviour = describe
    report = consolidate(svc)
    assert report.status == "done" and report.counts["core_schemas_created"] == 0
    assert nodes(svc)[0] == [] and nodes(svc, kind="core_schema")[0] == []


def test_one_users_failure_does_not_stop_the_run_for_the_others(svc, monkeypatch):
    remember(svc, RUNNING, "fitness"), remember(svc, RUNNING, "fitness", user="bob")
    triage = runs_module.triage

    def broken_for_ana(db, index, settings, user_id):
        if user_id == "ana":
            raise RuntimeError("a bug that only ana's data triggers")
        return triage(db, index, settings, user_id)

    monkeypatch.setattr(runs_module, "triage", broken_for_ana)
    reports = run_consolidation(svc.consolidation.backends, ["ana", "bob"])
    assert [(r.user_id, r.status) for r in reports] == [("ana", "failed"), ("bob", "done")]
    assert svc.runs("ana")[0].status == "failed" and "RuntimeError" in svc.runs("ana")[0].errors[0]
    assert nodes(svc, user="bob")[0] and nodes(svc)[0] == []
