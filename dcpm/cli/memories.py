"""Commands that put memories in and get them back: `add` one message, `search` (no LLM),
`import` a chat history in bulk, `backfill` the inputs that wait for an LLM."""

from __future__ import annotations

import signal
import time
from datetime import datetime
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from dcpm.cli.output import JsonFlag, dump, err, memory, out, progress, request, settings, when


def add(user: str, text: str,
        session: Annotated[Optional[str], typer.Option(help="Session id.")] = None,
        speaker: Annotated[Optional[str], typer.Option(help="Speaker name.")] = None,
        role: Annotated[str, typer.Option(help="Who said it: user, assistant, ...")] = "user",
        infer: Annotated[bool, typer.Option(help="Extract facts with the LLM (--no-infer: verbatim only).")] = True,
        as_json: JsonFlag = False) -> None:
    """Remember one message for USER.

    Example: dcpm add ana "I switched from coffee to green tea" --speaker Ana"""
    from dcpm.api.models import AddMemoryRequest

    message = request(AddMemoryRequest, user_id=user, messages=[{"role": role, "content": text, "name": speaker}],
                      session_id=session, infer=infer)
    with memory() as mem:
        result = mem.add_memory(message)
    if as_json:
        return dump(result)
    out.print(f"{result.status}: {len(result.raw_ids)} turn(s) for {user} (request {result.request_id})")
    if result.llm_calls:
        out.print(f"  {result.llm_calls} LLM call(s), {result.tokens} tokens, {result.timings_ms}")
    for operation in result.operations:
        out.print(f"  {operation.op:<9} {operation.id}  {operation.text}")
    if result.message:
        out.print(f"  {result.message}")


def search(user: str, query: str,
           limit: Annotated[int, typer.Option("--limit", "-n", help="Memories to return (at most the "
                                                                  "max_search_limit setting).")] = 10,
           kind: Annotated[Optional[list[str]], typer.Option(help="raw, fact, identity, summary (repeatable).")] = None,
           as_of: Annotated[Optional[datetime], typer.Option(help="What was believed at this date.")] = None,
           context: Annotated[bool, typer.Option(help="Print the rendered context block.")] = False,
           associative: Annotated[bool, typer.Option(help="Use the associative query adapter when one is "
                                                          "loaded (--no-associative: frozen encoder).")] = True,
           threshold: Annotated[Optional[float], typer.Option(
               "--threshold", "--min-score", min=0.0, max=1.0,
               help="Only memories scoring at least this (0-1; default: the search_threshold setting).")] = None,
           as_json: JsonFlag = False) -> None:
    """Search USER's memories (no LLM).

    Example: dcpm search ana "what does Ana drink?" --context"""
    from dcpm.api.models import SearchRequest
    from dcpm.domain import SEARCH_KINDS

    wanted = request(SearchRequest, user_id=user, query=query, limit=limit, kinds=kind or list(SEARCH_KINDS),
                     as_of=as_of, associative=associative, threshold=threshold)
    with memory() as mem:
        result = mem.search(wanted)
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


def import_file(path: Path,
                user: Annotated[Optional[str], typer.Option(help="User for lines without user_id.")] = None,
                batch_size: Annotated[Optional[int], typer.Option(help="Turns per embedding batch.")] = None,
                as_json: JsonFlag = False) -> None:
    """Bulk-import a chat history (JSONL). Safe to re-run: turns already stored are skipped.

    One JSON object per line: text (or content), and optionally user_id, role, speaker (or name), session_id,
    timestamp, metadata, id. A timestamp is a date with its year, month and day (ISO-8601 or any common form)
    or Unix time. Every line is checked before anything is stored.

    Example: dcpm import history.jsonl --user ana"""
    from dcpm.write.importer import import_lines, read_file

    config = settings()
    lines = read_file(path, user, config)
    started = time.perf_counter()
    done = [0]  # turns of the batches stored so far (a batch is stored whole or not at all)

    def advance(n: int) -> None:
        done[0] += n
        bar.advance(task, n)

    code = [130]  # Ctrl-C's exit status (128 + SIGINT)

    def terminate(signum: int, _frame: object) -> None:
        """A SIGTERM (`timeout`, a service manager) stops the import as Ctrl-C does, and says so."""
        code[0] = 128 + signum
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        with memory() as mem, progress() as bar:
            task = bar.add_task(f"importing {path.name}", total=len(lines))
            imported = import_lines(mem.import_turns, lines, min(batch_size or config.import_batch_size,
                                                                 config.max_messages), advance)
    except KeyboardInterrupt:
        err.print(f"interrupted: at least {done[0]} of {len(lines)} turn(s) are stored; run the same command "
                  "again to import the rest (stored turns are skipped)")
        raise typer.Exit(code[0]) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    seconds = time.perf_counter() - started
    report = {"read": len(lines), "imported": imported, "skipped": len(lines) - imported,
              "users": sorted({line.user_id for line in lines}), "seconds": round(seconds, 2),
              "turns_per_second": round(len(lines) / seconds, 1) if seconds else None}
    if as_json:
        return dump(report)
    out.print(f"imported {imported} of {len(lines)} turn(s) ({report['skipped']} already stored) "
              f"for {len(report['users'])} user(s) in {seconds:.1f}s")


RETRY_FAILED = typer.Option("--retry-failed", help="Also retry inputs marked failed (after fixing their cause).")


def backfill(retry_failed: Annotated[bool, RETRY_FAILED] = False) -> None:
    """Extract facts from every pending input (after an LLM was configured)."""
    with memory() as mem, progress() as bar:
        task = bar.add_task("processing pending inputs", total=None)
        done = mem.backfill(lambda users, total: bar.update(task, completed=users, total=total), retry_failed)
    out.print(f"processed {done} pending request(s)")
