"""Commands of System 2 (DCPM 2.3): `consolidate` (start a job and follow it with a progress bar),
`runs` (the recorded runs), `consent` (which inferred layers a user has opted into) and `graph`
(a user's schema / intention / core-schema graph as text, Graphviz dot or JSON)."""

from __future__ import annotations

import json
import time
from typing import Annotated, Optional

import typer
from rich.table import Table

from dcpm.cli.output import JsonFlag, dump, heading, memory, out, progress, request, when
from dcpm.errors import Invalid

OnOff = Annotated[Optional[str], typer.Option(help="on or off")]
POLL_SECONDS = 0.5


def consolidate(user: Annotated[Optional[str], typer.Option(help="One user.")] = None,
                all_users: Annotated[bool, typer.Option("--all", help="Every user.")] = False,
                dry_run: Annotated[bool, typer.Option(help="Phase 1 only: clusters, no LLM, no writes.")] = False,
                as_json: JsonFlag = False) -> None:
    """Run the nightly consolidation now (schemas, intentions, core schemas). For cron."""
    from dcpm.api.models import ConsolidateRequest

    # ConsolidateRequest refuses this too, but in the API's words (user_id, all=true): say it in the options'.
    if (user is None) == (not all_users):
        raise Invalid("give --user USER or --all")
    wanted = request(ConsolidateRequest, user_id=user, all=all_users, dry_run=dry_run)
    with memory() as mem, progress() as bar:
        task = bar.add_task("consolidating", total=None)
        job = mem.consolidate(wanted)  # a background job, here or in the daemon: follow its run records
        while job.running:
            time.sleep(POLL_SECONDS)
            job = mem.consolidation_job(job.job_id)
            done = sum(r.counts.get("clusters_done", 0) for r in job.runs)
            total = sum(r.counts.get("clusters", 0) for r in job.runs)
            current = job.runs[-1] if job.runs else None
            bar.update(task, completed=done, total=total or None,
                       description=f"{current.user_id}: {current.phase}" if current else "starting")
    if as_json:
        return dump(job.runs)
    table = Table(show_edge=False)
    for column in ("user", "status", "fresh", "clusters", "nodes", "core", "LLM calls", "errors"):
        table.add_column(column)
    for run in job.runs:
        c = run.counts
        table.add_row(run.user_id, run.status, str(c.get("fresh_items", "-")), str(c.get("clusters", "-")),
                      str(c.get("nodes_created", "-")), str(c.get("core_schemas_created", "-")),
                      json.dumps(run.llm_calls), str(len(run.errors)))
    out.print(table)


def runs(user: Annotated[Optional[str], typer.Option(help="Only this user.")] = None,
         limit: Annotated[int, typer.Option(help="Newest runs to show (1-1000).")] = 20,
         as_json: JsonFlag = False) -> None:
    """Recorded consolidation runs, newest first."""
    from dcpm.domain import MAX_RUNS, check_limit

    check_limit(limit, MAX_RUNS)  # refused here, in the same words, whether or not a daemon would answer
    with memory() as mem:
        result = mem.runs(user, limit)
    if as_json:
        return dump(result)
    for run in result:
        out.print(f"{when(run.started_at)}  {run.user_id:<16} {run.status:<11} {run.phase:<9} "
                  f"{run.counts.get('clusters', '-')} cluster(s), LLM {run.llm_calls}, {len(run.errors)} error(s)")


def _flag(value: str | None, name: str) -> bool | None:
    if value is None:
        return None
    if value.lower() not in ("on", "off"):
        raise Invalid(f"--{name} takes on or off")
    return value.lower() == "on"


def consent(user: str, core_schemas: OnOff = None, schemas: OnOff = None, intentions: OnOff = None,
            as_json: JsonFlag = False) -> None:
    """Show or change which inferred layers USER has opted into (core schemas are off by default)."""
    from dcpm.api.models import ConsentUpdate

    update = ConsentUpdate(core_schemas=_flag(core_schemas, "core-schemas"), schemas=_flag(schemas, "schemas"),
                           intentions=_flag(intentions, "intentions"))
    with memory() as mem:
        result = mem.consent(user, update if update.model_dump(exclude_none=True) else None)
    if as_json:
        return dump(result)
    for layer in ("schemas", "intentions", "core_schemas"):
        out.print(f"{layer.replace('_', '-'):<13} {'on' if getattr(result, layer) else 'off'}")


def graph(user: str, format: Annotated[str, typer.Option(help="text, dot or json")] = "text") -> None:
    """USER's schema / intention / core-schema graph."""
    with memory() as mem:
        result = mem.graph(user)
    if format == "json":
        return dump(result)
    if format == "dot":
        lines = [f'digraph "{user}" {{']
        lines += [f'  "{n.id}" [label={json.dumps(f"{n.kind}: {n.text}")}, shape={_SHAPES.get(n.kind, "box")}];'
                  for n in result.nodes]
        lines += [f'  "{e.source}" -> "{e.target}" [label="{e.type}"];' for e in result.edges]
        out.print("\n".join(lines + ["}"]), highlight=False)
        return
    if format != "text":
        raise Invalid("--format takes text, dot or json")
    if not result.nodes:
        out.print(f"{user} has no schemas yet (run `dcpm consolidate --user {user}`)")
    for node in result.nodes:
        line = heading(node.kind, f"({node.domain}) {node.text}  ")
        out.print(line.append(f"{node.id}, {len(node.evidence)} evidence", "dim"))
    for edge in result.edges:
        out.print(f"  {edge.source} -{edge.type}-> {edge.target}")


_SHAPES = {"schema": "box", "intention": "ellipse", "core_schema": "doubleoctagon"}
