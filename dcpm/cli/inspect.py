"""Commands that read what is stored and inferred, and change nothing: `items`, `users`, `show`
(a memory or a graph node), `history` (an item's chain of events), `events` (a user's log) and
`health`."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Optional

import typer
from rich.table import Table

from dcpm.cli.output import JsonFlag, dump, heading, memory, out, when


def items(user: str, kind: Annotated[Optional[str], typer.Option(help="raw, fact, identity or summary.")] = None,
          status: Annotated[Optional[str],
                            typer.Option(help="current or superseded (raw: pending, done, ...).")] = None,
          topic: Annotated[Optional[str], typer.Option(help="Life domain, e.g. food.")] = None,
          since: Annotated[Optional[datetime], typer.Option(help="Only what started to hold since this date.")] = None,
          limit: Annotated[int, typer.Option(help="Entries to list (1-1000).")] = 50,
          offset: Annotated[int, typer.Option(help="Entries to skip first (the next page).")] = 0,
          as_json: JsonFlag = False) -> None:
    """List USER's items (or raw inputs with --kind raw)."""
    from dcpm.domain import check_page

    check_page(limit, offset)  # refused here, in the same words, whether or not a daemon would answer
    with memory() as mem:
        result = mem.list_memories(user, kind=kind, limit=limit, offset=offset, status=status, topic=topic,
                                   since=since)
    if as_json:
        return dump(result)
    table = Table(show_edge=False, title=f"{result.total} {kind or 'item'}(s) of {user}")
    for column in ("id", "kind", "when", "text"):
        table.add_column(column, overflow="fold")
    for entry in result.items:
        moment = entry.timestamp if entry.kind == "raw" else entry.valid_from
        marker = "" if entry.kind == "raw" or entry.current else " (superseded)"
        table.add_row(entry.id, entry.kind, when(moment), entry.text + marker)
    out.print(table)


def users(as_json: JsonFlag = False) -> None:
    """Users with stored memories."""
    with memory() as mem:
        result = mem.users()
    if as_json:
        return dump(result)
    table = Table(show_edge=False)
    for column in ("user", "raw inputs", "items", "last seen"):
        table.add_column(column)
    for user in result:
        table.add_row(user.id, str(user.raw_inputs), str(user.items), when(user.last_seen_at))
    out.print(table)


def show(memory_id: str, as_json: JsonFlag = False) -> None:
    """One memory (an item with its chain and revisions, or a raw input), or a graph node with its
    evidence and edges."""
    from dcpm.api.models import NodeOut
    from dcpm.domain import check_memory_id
    from dcpm.errors import NotFound

    check_memory_id(memory_id, "memory or graph node")  # both are looked up: the refusal names both
    with memory() as mem:
        try:
            entry = mem.get(memory_id)
        except NotFound:
            try:
                entry = mem.node(memory_id)
            except NotFound:
                raise NotFound(f"no memory or graph node with id {memory_id}") from None
    if as_json:
        return dump(entry)
    if isinstance(entry, NodeOut):
        out.print(heading(entry.kind, f"{entry.id} ({entry.domain}, user {entry.user_id}, {entry.status})"))
        out.print(entry.text)
        if entry.behavior:
            out.print(f"  behaviour: {entry.behavior}")
        for item in entry.evidence:
            out.print(f"  <- {item.kind} {item.id}: {item.text}{'' if item.current else ' (superseded)'}")
        for edge in entry.edges:
            out.print(f"  {edge.source} -{edge.type}-> {edge.target}")
        return
    out.print(heading(entry.kind, f"{entry.id} (user {entry.user_id})"))
    out.print(entry.text)
    if entry.kind == "raw":
        out.print(f"said {when(entry.timestamp)} by {entry.speaker or entry.role}, session {entry.session_id or '-'}, "
                  f"status {entry.status}")
        if entry.error:  # why extraction failed (status failed: given up on; pending: to be retried)
            out.print(f"  error: {entry.error}")
        return
    for link in entry.chain or []:
        out.print(f"  {'*' if link.current else '-'} r{link.revision} {when(link.valid_from)}  {link.text}")
    for revision in entry.revisions or []:
        out.print(f"  revision {revision.revision} ({revision.op}): {revision.text}")
    for situation in entry.anticipations:  # when extraction expects it to matter (Settings.anticipations)
        out.print(f"  comes back when: {situation}")


def history(memory_id: str, as_json: JsonFlag = False) -> None:
    """Every event of an item and its chain: created, updated (before/after), superseded."""
    from dcpm.store.events import item_change

    with memory() as mem:
        result = mem.history(memory_id)
    if as_json:
        return dump(result)
    for event in result.events:
        change = item_change(event.action, event.item_id, event.at, event.request_id, event.detail)
        what = {"created": change.text, "updated": f"{change.before!r} -> {change.text!r}",
                "superseded": f"by {change.superseded_by}"}.get(change.action, event.detail)
        source = f" (raw {change.raw_id})" if change.raw_id else ""
        out.print(f"{when(change.at)}  {change.action:<10} {change.item_id}  {what}{source}")


def events(user: str, limit: Annotated[int, typer.Option(help="Newest events to show (1-5000).")] = 50,
           as_json: JsonFlag = False) -> None:
    """USER's event log, newest first."""
    from dcpm.domain import MAX_EVENTS, check_limit

    check_limit(limit, MAX_EVENTS)  # as `items` checks its page
    with memory() as mem:
        result = mem.events(user, limit)
    if as_json:
        return dump(result)
    for event in result:
        out.print(f"{when(event.at)}  {event.action:<18} {event.item_id}  {event.detail}")


def health(as_json: JsonFlag = False) -> None:
    """Store, index, embedder and LLM status."""
    with memory() as mem:
        report = mem.health()
    if as_json:
        return dump(report)
    out.print(f"status: {report['status']}")
    for part in ("store", "index", "embedder", "llm"):
        out.print(f"  {part}: {report[part]}")
