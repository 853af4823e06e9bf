"""`dcpm` builds only the command it runs (Typer reads every command's signature when it builds an
app), yet every command, option and help screen behaves as with the whole app."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from dcpm.cli.main import app, app_for, invoked_command


@pytest.mark.parametrize(("argv", "command"), [
    (["users"], "users"),
    (["--data-dir", "/tmp/x", "items", "ana"], "items"),
    (["--data-dir=/tmp/x", "--config", "a.toml", "keys", "list"], "keys"),
    (["--help"], None),
    (["--data-dir", "/tmp/x"], None),
    ([], None),
])
def test_the_invoked_command_is_found_after_the_global_options(argv, command):
    assert invoked_command(argv) == command


def test_a_command_gets_an_app_with_it_alone_and_help_or_a_typo_gets_the_whole_app():
    slim = app_for(["import", "turns.jsonl"])
    assert [c.callback.__name__ for c in slim.registered_commands] == ["import_file"]
    assert [g.name for g in app_for(["keys", "list"]).registered_groups] == ["keys"]
    assert app_for(["--help"]) is app and app_for(["nope"]) is app


def test_the_slim_app_takes_the_global_options_and_the_commands_own(tmp_path):
    result = CliRunner().invoke(app_for(["users"]), ["--data-dir", str(tmp_path / "d"), "users", "--json"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "[]"
    typo = CliRunner().invoke(app_for(["userz"]), ["userz"])
    assert typo.exit_code == 2 and "No such command 'userz'" in typo.output
