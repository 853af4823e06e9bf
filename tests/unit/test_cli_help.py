"""`dcpm --help` and each command's help, read as a user reads them: every option says what it is
for, and the commands whose input is a file say what goes in and where output goes."""

from __future__ import annotations

import pytest
import typer.main
from typer.testing import CliRunner

from dcpm.cli.main import app


def commands(group, prefix=()):  # type: ignore[no-untyped-def]
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from commands(command, (*prefix, name))
        else:
            yield (*prefix, name), command


def test_every_option_of_every_command_says_what_it_is_for():
    bare = [f"dcpm {' '.join(name)} {param.opts[0]}" for name, command in commands(typer.main.get_command(app))
            for param in command.params if param.param_type_name == "option" and not param.help]
    assert bare == []


@pytest.mark.parametrize("command, says", [
    ("export", ["USER.dcpm.jsonl", "dcpm export ana -o ana.jsonl"]),
    ("import", ["content", "speaker (or name)", "id", "year, month and day", "dcpm import history.jsonl --user ana"]),
    ("search", ['dcpm search ana "what does Ana drink?"']),
    ("delete", ["dcpm delete --user ana --session"]),
])
def test_a_command_that_takes_a_file_or_deletes_shows_how(command, says):
    shown = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "400"}).output
    for words in says:
        assert words in shown, (words, shown)
