"""`dcpm`: the command line. Commands talk to the daemon when one serves the data directory,
otherwise they open the store directly; either way the output is the same."""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, ContextManager, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from dcpm.cli.adapter import adapter_app
from dcpm.cli.output import JsonFlag, dump, err, memory, out, progress, request, settings, when
from dcpm.errors import DcpmError, Invalid

app = typer.Typer(help="dcpm: long-term memory for LLM assistants.", no_args_is_help=True,
                  pretty_exceptions_enable=False, add_completion=False)
db_app = typer.Typer(help="Relational store.", no_args_is_help=True)
config_app = typer.Typer(help="Settings.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(config_app, name="config")
app.add_typer(adapter_app, name="adapter")
@app.callback()
def _global(data_dir: Annotated[Optional[Path], typer.Option(help="Data directory (DCPM_DATA_DIR).")] = None,
            config: Annotated[Optional[Path], typer.Option(help="TOML settings file (DCPM_CONFIG).")] = None) -> None:
    if data_dir is not None:
        os.environ["DCPM_DATA_DIR"] = str(data_dir)
    if config is not None:
        if not config.is_file():
            raise Invalid(f"no such settings file: {config}")
        os.environ["DCPM_CONFIG"] = str(config)


@app.command()
def serve(host: Annotated[Optional[str], typer.Option(help="Bind address (DCPM_HOST).")] = None,
          port: Annotated[Optional[int], typer.Option(help="Port (DCPM_PORT).")] = None,
          log_level: str = "info") -> None:
    """Run the daemon: HTTP API, writer and index upkeep. OpenAPI page at /docs."""
    import logging

    import uvicorn

    from dcpm.store.datadir import DataDirLock, clear_daemon, write_daemon
    from dcpm.server.app import create_app
    from dcpm.service import MemoryService

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    settings = settings()
    host = host or settings.host
    port = port or settings.port
    lock = DataDirLock(settings.data_dir)
    lock.acquire()
    service = MemoryService(settings)
    try:
        service.maintenance.start()
        if service.llm is not None:
            service.recovery.start()
            if settings.consolidation_schedule:
                from workers.consolidation import schedule_nightly

                schedule_nightly(service.consolidation.engine, settings.consolidation_cron)
        client_host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        write_daemon(settings.data_dir, f"http://{client_host}:{port}")
        err.print(f"dcpm serving {settings.data_dir} on http://{host}:{port} (OpenAPI: /docs)")
        uvicorn.run(create_app(service), host=host, port=port, log_level=log_level.lower())
    finally:
        clear_daemon(settings.data_dir)
        service.close()
        lock.release()


@app.command()
def mcp(user: Annotated[Optional[str], typer.Option(help="The user every tool call acts for (DCPM_MCP_USER); "
                                                         "unset: the client names it in request metadata.")] = None,
        transport: Annotated[str, typer.Option(help="stdio (for Claude Desktop, Cursor) or http (streamable "
                                                    "HTTP at /mcp).")] = "stdio",
        host: Annotated[str, typer.Option(help="Bind address with --transport http.")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="Port with --transport http.")] = 8421,
        allow_delete: Annotated[Optional[bool], typer.Option("--allow-delete/--no-allow-delete",
                                                             help="Offer the model delete_memory "
                                                                  "(DCPM_MCP_ALLOW_DELETE).")] = None,
        log_level: str = "warning") -> None:
    """Serve the memory over the Model Context Protocol. Uses the daemon when one serves the data
    directory, else opens the store itself. On stdio nothing but MCP goes to stdout."""
    import logging
    from contextlib import ExitStack

    from dcpm.mcp.server import build_server, stdout_to_stderr
    from dcpm.service import open_memory

    if transport not in ("stdio", "http"):
        raise Invalid(f"unknown transport {transport!r}: use stdio or http")
    logging.basicConfig(level=log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    settings = settings()
    with ExitStack() as stack:
        with stdout_to_stderr():
            memory_backend = stack.enter_context(open_memory(settings, background=True))
        server = build_server(memory_backend, user_id=user or settings.mcp_user or None,
                              allow_delete=settings.mcp_allow_delete if allow_delete is None else allow_delete)
        if transport == "stdio":
            server.run("stdio")
        else:
            err.print(f"dcpm MCP server on http://{host}:{port}/mcp")
            server.run("streamable-http", host=host, port=port)


@app.command()
def add(user: str, text: str,
        session: Annotated[Optional[str], typer.Option(help="Session id.")] = None,
        speaker: Annotated[Optional[str], typer.Option(help="Speaker name.")] = None,
        role: str = "user",
        infer: Annotated[bool, typer.Option(help="Extract facts with the LLM (--no-infer: verbatim only).")] = True,
        as_json: JsonFlag = False) -> None:
    """Remember one message for USER."""
    from dcpm.api.models import AddMemoryRequest

    request = request(AddMemoryRequest, user_id=user, messages=[{"role": role, "content": text, "name": speaker}],
                       session_id=session, infer=infer)
    with memory() as mem:
        result = mem.add_memory(request)
    if as_json:
        return dump(result)
    out.print(f"{result.status}: {len(result.raw_ids)} turn(s) for {user} (request {result.request_id})")
    if result.llm_calls:
        out.print(f"  {result.llm_calls} LLM call(s), {result.tokens} tokens, {result.timings_ms}")
    for operation in result.operations:
        out.print(f"  {operation.op:<9} {operation.id}  {operation.text}")
    if result.message:
        out.print(f"  {result.message}")


@app.command()
def search(user: str, query: str,
           limit: Annotated[int, typer.Option("--limit", "-n")] = 10,
           kind: Annotated[Optional[list[str]], typer.Option(help="raw, fact, identity, summary (repeatable).")] = None,
           as_of: Annotated[Optional[datetime], typer.Option(help="What was believed at this date.")] = None,
           context: Annotated[bool, typer.Option(help="Print the rendered context block.")] = False,
           associative: Annotated[bool, typer.Option(help="Use the associative query adapter when one is "
                                                          "loaded (--no-associative: frozen encoder).")] = True,
           as_json: JsonFlag = False) -> None:
    """Search USER's memories (no LLM)."""
    from dcpm.api.models import SearchRequest
    from dcpm.domain import SEARCH_KINDS

    request = request(SearchRequest, user_id=user, query=query, limit=limit, kinds=kind or list(SEARCH_KINDS),
                       as_of=as_of, associative=associative)
    with memory() as mem:
        result = mem.search(request)
    if as_json:
        return dump(result)
    if context:
        out.print(result.context or "(nothing relevant)")
        return
    table = Table(show_edge=False, title=f"{len(result.hits)} hit(s) in {result.took_ms:.0f} ms ({result.encoder})")
    for column in ("#", "score", "kind", "when", "text"):
        table.add_column(column, overflow="fold")
    for rank, hit in enumerate(result.hits, 1):
        text = f"{hit.speaker}: {hit.text}" if hit.speaker else hit.text
        if hit.chain and len(hit.chain) > 1:
            text += "".join(f"\n  {'*' if link.current else '-'} r{link.revision} {link.text}" for link in hit.chain)
        table.add_row(str(rank), f"{hit.score:.3f}", hit.kind, when(hit.timestamp), text)
    out.print(table)


@app.command("import")
def import_file(path: Path,
                user: Annotated[Optional[str], typer.Option(help="User for lines without user_id.")] = None,
                batch_size: Annotated[Optional[int], typer.Option(help="Turns per embedding batch.")] = None,
                as_json: JsonFlag = False) -> None:
    """Bulk-import a chat history (JSONL: text, user_id, role, speaker, session_id, timestamp, metadata).
    Safe to re-run: turns already stored are skipped."""
    from dcpm.write.importer import import_lines, read_file

    settings = settings()
    lines = read_file(path, user, settings)
    started = time.perf_counter()
    with memory() as mem, progress() as bar:
        task = bar.add_task(f"importing {path.name}", total=len(lines))
        size = min(batch_size or settings.import_batch_size, settings.max_messages)
        imported = import_lines(mem.import_turns, lines, size,
                                lambda n: bar.advance(task, n))
    seconds = time.perf_counter() - started
    report = {"read": len(lines), "imported": imported, "skipped": len(lines) - imported,
              "users": sorted({line.user_id for line in lines}), "seconds": round(seconds, 2),
              "turns_per_second": round(len(lines) / seconds, 1) if seconds else None}
    if as_json:
        return dump(report)
    out.print(f"imported {imported} of {len(lines)} turn(s) ({report['skipped']} already stored) "
              f"for {len(report['users'])} user(s) in {seconds:.1f}s")


@app.command()
def items(user: str, kind: Annotated[Optional[str], typer.Option(help="raw, fact, identity or summary.")] = None,
          status: Annotated[Optional[str], typer.Option(help="current or superseded (raw: pending, done, ...).")] = None,
          topic: Annotated[Optional[str], typer.Option(help="Life domain, e.g. food.")] = None,
          since: Annotated[Optional[datetime], typer.Option(help="Only what started to hold since this date.")] = None,
          limit: int = 50, offset: int = 0, as_json: JsonFlag = False) -> None:
    """List USER's items (or raw inputs with --kind raw)."""
    with memory() as mem:
        result = mem.list_memories(user, kind=kind, limit=limit, offset=offset, status=status, topic=topic,
                                   since=since)
    if as_json:
        return dump(result)
    table = Table(show_edge=False, title=f"{result.total} {kind or 'item'}(s) of {user}")
    for column in ("id", "kind", "when", "text"):
        table.add_column(column, overflow="fold")
    for entry in result.items:
        when = entry.timestamp if entry.kind == "raw" else entry.valid_from
        marker = "" if entry.kind == "raw" or entry.current else " (superseded)"
        table.add_row(entry.id, entry.kind, when(when), entry.text + marker)
    out.print(table)


@app.command()
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


@app.command()
def show(memory_id: str, as_json: JsonFlag = False) -> None:
    """One memory (an item with its chain and revisions, or a raw input), or a graph node with its
    evidence and edges."""
    from dcpm.errors import NotFound

    with memory() as mem:
        try:
            entry = mem.get(memory_id)
        except NotFound:
            entry = mem.node(memory_id)
    if as_json:
        return dump(entry)
    if hasattr(entry, "evidence"):
        out.print(f"[bold]{entry.kind}[/bold] {entry.id} ({entry.domain}, user {entry.user_id}, {entry.status})")
        out.print(entry.text)
        if entry.behavior:
            out.print(f"  behaviour: {entry.behavior}")
        for item in entry.evidence:
            out.print(f"  <- {item.kind} {item.id}: {item.text}{'' if item.current else ' (superseded)'}")
        for edge in entry.edges:
            out.print(f"  {edge.source} -{edge.type}-> {edge.target}")
        return
    out.print(f"[bold]{entry.kind}[/bold] {entry.id} (user {entry.user_id})")
    out.print(entry.text)
    if entry.kind == "raw":
        out.print(f"said {when(entry.timestamp)} by {entry.speaker or entry.role}, session {entry.session_id or '-'}, "
                  f"status {entry.status}")
        return
    for link in entry.chain or []:
        out.print(f"  {'*' if link.current else '-'} r{link.revision} {when(link.valid_from)}  {link.text}")
    for revision in entry.revisions or []:
        out.print(f"  revision {revision.revision} ({revision.op}): {revision.text}")


@app.command()
def history(memory_id: str, as_json: JsonFlag = False) -> None:
    """Every event of an item and its chain: created, updated (before/after), superseded."""
    with memory() as mem:
        result = mem.history(memory_id)
    if as_json:
        return dump(result)
    for event in result.events:
        detail = event.detail
        what = {"created": detail.get("text"), "updated": f"{detail.get('before')!r} -> {detail.get('after')!r}",
                "superseded": f"by {detail.get('by')}"}.get(event.action, detail)
        source = f" (raw {detail['raw_id']})" if detail.get("raw_id") else ""
        out.print(f"{when(event.at)}  {event.action:<10} {event.item_id}  {what}{source}")


@app.command()
def backfill() -> None:
    """Extract facts from every pending input (after an LLM was configured)."""
    with memory() as mem:
        with err.status("processing pending inputs..."):
            done = mem.backfill()
    out.print(f"processed {done} pending request(s)")


@app.command("export")
def export_user(user: str, output: Annotated[Optional[Path], typer.Option("--output", "-o")] = None) -> None:
    """Write everything of USER (raw, items, chains, revisions, graph, events, consent) as JSONL."""
    path = output or Path(f"{user}.dcpm.jsonl")
    with memory() as mem:
        manifest = mem.export_user(user, path)
    counts = ", ".join(f"{n} {k}" for k, n in manifest["counts"].items() if n)
    out.print(f"exported {user} to {path}: {counts}")


@app.command()
def restore(path: Path) -> None:
    """Load an export made by `dcpm export` (into a store that does not have that user yet)."""
    with memory() as mem:
        manifest = mem.restore(path)
    out.print(f"restored {manifest['user_id']} ({sum(manifest['counts'].values())} records)")


@app.command()
def reindex() -> None:
    """Rebuild the vector index from the relational store."""
    with memory() as mem:
        if hasattr(mem, "db"):
            from dcpm.index.projection import count_rows

            total = count_rows(mem.db, only_unindexed=False)
            with progress() as bar:
                task = bar.add_task("reindexing", total=total)
                points = mem.reindex(lambda n: bar.advance(task, n))
        else:
            with err.status("the daemon is reindexing..."):
                points = mem.reindex()
    out.print(f"reindexed {points} point(s)")


@app.command()
def health(as_json: JsonFlag = False) -> None:
    """Store, index, embedder and LLM status."""
    with memory() as mem:
        report = mem.health()
    if as_json:
        return dump(report)
    out.print(f"status: {report['status']}")
    for part in ("store", "index", "embedder", "llm"):
        out.print(f"  {part}: {report[part]}")


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Apply pending migrations to the relational store."""
    from dcpm.store.db import make_engine, upgrade

    settings = settings()
    if settings.sqlalchemy_url.startswith("sqlite:///"):
        Path(settings.sqlalchemy_url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    engine = make_engine(settings.sqlalchemy_url)
    try:
        out.print(f"database at revision {upgrade(engine)}")
    finally:
        engine.dispose()


@config_app.command("show")
def config_show(as_json: JsonFlag = False) -> None:
    """Effective settings, secrets masked."""
    shown = settings().masked()
    if as_json:
        return dump(shown)
    for key, value in shown.items():
        out.print(f"{key} = {value!r}")


from dcpm.cli import consolidation, edits, keys  # noqa: E402,F401  (register their commands on `app`)


def main() -> None:
    try:
        app()
    except DcpmError as exc:
        err.print(f"error: {exc.message}", markup=False, highlight=False)
        sys.exit(exc.exit_code)
