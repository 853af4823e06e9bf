"""`dcpm`: the command line's entry point. It builds the Typer app, takes the global options
(`--data-dir`, `--config`) into `output.OVERRIDES`, registers every command of the modules beside
it (which never import this one), holds the two small groups `db` and `config`, and maps dcpm's
errors to their message and exit code in `main()`. Commands talk to the daemon when one serves
the data directory, otherwise they open the store directly; either way the output is the same."""

from __future__ import annotations

import gc
import os
import sys
from inspect import cleandoc, getdoc
from pathlib import Path
from typing import Annotated

import typer
from typer.main import get_command_name

from dcpm.cli import consolidation, edits, inspect, memories, operations, serve
from dcpm.cli.adapter import adapter_app
from dcpm.cli.keys import keys_app
from dcpm.cli.output import OVERRIDES, JsonFlag, dump, err, out, settings
from dcpm.errors import DcpmError, Invalid, from_os_error

APP_OPTIONS = {"help": "dcpm: long-term memory for LLM assistants.", "no_args_is_help": True,
               "pretty_exceptions_enable": False, "add_completion": False}
app = typer.Typer(**APP_OPTIONS)
db_app = typer.Typer(help="Relational store.", no_args_is_help=True)
config_app = typer.Typer(help="Settings.", no_args_is_help=True)


DataDir = Annotated[str | None, typer.Option(metavar="<path>", help="Data directory (DCPM_DATA_DIR).")]


@app.callback()
def _global(data_dir: DataDir = None,
            config: Annotated[Path | None, typer.Option(help="TOML settings file (DCPM_CONFIG).")] = None) -> None:
    if data_dir is not None and not data_dir.strip():  # as a Path, "" would be the current directory
        from dcpm.setting_types import EMPTY_DATA_DIR

        raise Invalid(f"--data-dir: {EMPTY_DATA_DIR}")
    if config is not None and not config.is_file():
        raise Invalid(f"{config} is a directory, not a settings file (a TOML file)" if config.is_dir()
                      else f"no such settings file: {config}")
    OVERRIDES.data_dir = Path(data_dir) if data_dir is not None else None
    OVERRIDES.config = config


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Apply pending migrations to the relational store."""
    from dcpm.store.db import Database, upgrade

    db = Database(settings().sqlalchemy_url, migrate=False)
    try:
        out.print(f"database at revision {upgrade(db.engine)}")
    finally:
        db.close()


@config_app.command("show")
def config_show(as_json: JsonFlag = False) -> None:
    """Effective settings, secrets masked."""
    shown = settings().masked()
    if as_json:
        return dump(shown)
    for key, value in shown.items():
        out.print(f"{key} = {value!r}")


# In the order `dcpm --help` lists them; two are named apart from their function (`import` is a keyword).
COMMANDS = (serve.serve, serve.mcp, memories.add, memories.search, memories.import_file, inspect.items, inspect.users,
            inspect.show, inspect.history, memories.backfill, operations.export_user, operations.restore,
            operations.reindex, inspect.health, consolidation.consolidate, consolidation.runs, consolidation.consent,
            consolidation.graph, edits.delete, inspect.events)
NAMES = {memories.import_file: "import", operations.export_user: "export"}
for command in COMMANDS:
    app.command(NAMES.get(command))(command)
app.add_typer(db_app, name="db")
app.add_typer(config_app, name="config")
app.add_typer(adapter_app, name="adapter")
app.add_typer(keys_app, name="keys")


def one_line_paragraphs(text: str | None) -> str | None:
    """Help text from a docstring: dedented, and each paragraph one line for the terminal to wrap
    (Typer's help keeps a docstring's line breaks after the first paragraph, mid-sentence)."""
    if not text:
        return text
    return "\n\n".join(" ".join(paragraph.split()) for paragraph in cleandoc(text).split("\n\n"))


def tidy_help(group: typer.Typer) -> None:
    """Every command's help in `group` and its sub-apps, tidied once here rather than in each docstring."""
    for command in group.registered_commands:
        command.help = one_line_paragraphs(command.help or getdoc(command.callback))
    for sub in group.registered_groups:
        tidy_help(sub.typer_instance)


tidy_help(app)


GLOBAL_OPTIONS = ("--data-dir", "--config")  # the options before a command, each with a value


def invoked_command(argv: list[str]) -> str | None:
    """The command `argv` names after the global options; None for `--help` and the like."""
    args = iter(argv)
    for arg in args:
        if arg in GLOBAL_OPTIONS:
            next(args, None)
        elif not arg.startswith(tuple(f"{option}=" for option in GLOBAL_OPTIONS)):
            return None if arg.startswith("-") else arg
    return None


def app_for(argv: list[str]) -> typer.Typer:
    """The app with only the command `argv` invokes. Typer reads every command's signature when it
    builds the app, a tenth of a second that `dcpm users` need not pay; help and unknown commands
    get the whole app, so they list and suggest every command as before."""
    name = invoked_command(argv)
    commands = [c for c in app.registered_commands if (c.name or get_command_name(c.callback.__name__)) == name]
    groups = [g for g in app.registered_groups if g.name == name]
    if not commands and not groups:
        return app
    slim = typer.Typer(**APP_OPTIONS)
    slim.registered_callback = app.registered_callback
    slim.registered_commands, slim.registered_groups = commands, groups
    return slim


PRIVATE_UMASK = 0o077  # what dcpm creates (data directory, store, shard, daemon.json, exports) is its owner's


def main(argv: list[str] | None = None) -> None:
    """Run `dcpm` on `argv` (default: the process's arguments); a DcpmError, or the file system's
    refusal of a path (dcpm.errors.from_os_error), becomes its message on stderr and its exit code.
    Files and directories are created private to their owner: they hold personal data, and home
    directories are often readable by every local user."""
    os.umask(PRIVATE_UMASK)
    try:
        app_for(sys.argv[1:] if argv is None else argv)(args=argv)
    except (DcpmError, OSError) as exc:
        error = exc if isinstance(exc, DcpmError) else from_os_error(exc)
        # Unwrapped: a message is one line however wide the terminal (the terminal wraps it).
        err.print(f"error: {error.message}", highlight=False, soft_wrap=True)
        sys.exit(error.exit_code)
    finally:
        # The process ends next. Its last garbage collections would walk every object the imports
        # made (a quarter of a short command's time, scripts/bench_cold_start.py), only for the
        # exit to free them anyway; frozen objects are skipped.
        gc.freeze()
