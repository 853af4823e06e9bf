"""Operator commands on a whole store or user: `export` a user as JSONL, `restore` one, and
`reindex` (rebuild the vector index from the relational store, with a progress bar)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from dcpm.cli.output import file_to_read, file_to_write, memory, out, private_file, progress

OUTPUT_HELP = "File to write (default: USER.dcpm.jsonl in the current directory), replaced whole."


def export_user(user: str, output: Annotated[Optional[Path], typer.Option("--output", "-o", help=OUTPUT_HELP)] = None
                ) -> None:
    """Write everything of USER (raw, items, chains, revisions, graph, events, consent) as JSONL,
    readable by its owner only (mode 0600).

    Example: dcpm export ana -o ana.jsonl, then dcpm restore ana.jsonl in another data directory"""
    path = file_to_write(output or Path(f"{user}.dcpm.jsonl"))
    with memory() as mem:
        manifest = mem.export_user(user, path)
    private_file(path)  # new files are already (umask 077, dcpm.cli.main); this covers one written over
    counts = ", ".join(f"{n} {k}" for k, n in manifest["counts"].items() if n)
    out.print(f"exported {user} to {path}: {counts}")


def restore(path: Path) -> None:
    """Load an export made by `dcpm export` (into a store that does not have that user yet)."""
    from dcpm.admin.export import read_rows

    read_rows(file_to_read(path))  # a file that is no export is refused here, named, whether or not a daemon runs
    with memory() as mem:
        manifest = mem.restore(path)
    out.print(f"restored {manifest['user_id']} ({sum(manifest['counts'].values())} records)")


def reindex() -> None:
    """Write every vector again from the relational store (searches go on meanwhile)."""
    with memory() as mem, progress() as bar:
        task = bar.add_task("reindexing", total=None)  # indeterminate until the first count arrives
        points = mem.reindex(lambda done, total: bar.update(task, completed=done, total=total))
    out.print(f"reindexed {points} point(s)")
