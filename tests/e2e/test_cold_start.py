"""Commands that only look at the store start fast without a daemon: they never import the
embedding model's stack (torch), System 2's (scikit-learn) or the LLM client's (openai), even
with an LLM configured, and they do not run Alembic on a store already at the newest revision.
A command that embeds says on stderr that the model is loading. Timing itself is measured by
scripts/bench_cold_start.py, not here."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from dcpm.testing.scripted_llm import LLMServer

from .daemon import dcpm_env, run_cli

HEAVY = ("torch", "transformers", "sklearn", "openai", "alembic")
# Light enough to import, but a command that only reads a SQLite store has no use for them
UNUSED = ("dcpm.write.writer", "dcpm.read.search", "dcpm.admin.delete", "dcpm.index.edge",
          "sqlalchemy.dialects.postgresql")
IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*([\w.]+)$", re.MULTILINE)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Ana's store, filled through the CLI as a user would: one turn the (scripted) LLM extracts an
    item from, one stored verbatim. The LLM stays up for the commands under test."""
    data_dir = tmp_path_factory.mktemp("cold") / "data"
    with LLMServer() as llm:
        env = {"DCPM_LLM_BASE_URL": llm.url, "DCPM_LLM_MODEL": "scripted"}
        added = run_cli(data_dir, "add", "ana", "I switched from coffee to green tea", "--json", **env)
        item_id = next(op["id"] for op in json.loads(added.stdout)["operations"] if op["op"] == "ADD")
        run_cli(data_dir, "add", "ana", "Note to self: call the dentist", "--no-infer", **env)
        yield data_dir, item_id, added.stderr, env


def imported_packages(store, *args: str) -> tuple[set[str], subprocess.CompletedProcess]:
    """Run `dcpm ARGS` on the store with Python's import log, the LLM configured: the top-level
    packages and the modules it imported."""
    data_dir, _, _, llm = store
    env = dcpm_env(data_dir, **llm)
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "dcpm.cli", *args], env=env, check=False,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    modules = set(IMPORTED.findall(result.stderr))
    return {name.split(".")[0] for name in modules} | modules, result


INSPECTION = [("users",), ("items", "ana"), ("show", "{item}"), ("history", "{item}"), ("events", "ana"),
              ("runs",), ("graph", "ana"), ("keys", "list"), ("health",), ("config", "show")]


@pytest.mark.parametrize("command", INSPECTION, ids=[" ".join(c) for c in INSPECTION])
def test_an_inspection_command_imports_no_model_no_clustering_and_no_llm_client(store, command):
    packages, result = imported_packages(store, *(arg.format(item=store[1]) for arg in command))
    assert not packages & set(HEAVY), f"dcpm {' '.join(command)} imported {sorted(packages & set(HEAVY))}"
    assert not packages & set(UNUSED), f"dcpm {' '.join(command)} imported {sorted(packages & set(UNUSED))}"
    assert "loading embedding model" not in result.stderr


def test_the_inspection_commands_still_answer_from_the_store(store):
    _, users = imported_packages(store, "users", "--json")
    assert [(u["id"], u["raw_inputs"], u["items"]) for u in json.loads(users.stdout)] == [("ana", 2, 1)]
    _, shown = imported_packages(store, "show", store[1], "--json")
    assert json.loads(shown.stdout)["text"] == "I switched from coffee to green tea"
    _, history = imported_packages(store, "history", store[1], "--json")
    assert [e["action"] for e in json.loads(history.stdout)["events"]] == ["created"]


def test_health_without_a_daemon_reports_the_model_unloaded_rather_than_loading_it(store):
    packages, result = imported_packages(store, "health", "--json")
    report = json.loads(result.stdout)
    assert report["store"]["ok"] is True
    assert report["index"]["ok"] is None and report["embedder"]["ok"] is None
    assert report["llm"]["ok"] is True  # the endpoint is probed: a GET, no chat client
    assert "torch" not in packages


def test_a_command_that_embeds_says_on_stderr_that_the_model_loads(store):
    assert "loading embedding model all-MiniLM-L6-v2" in store[2]


def test_help_shows_each_paragraph_of_a_docstring_without_its_line_breaks(tmp_path):
    wide = dcpm_env(tmp_path / "data", COLUMNS="400")
    shown = subprocess.run([sys.executable, "-m", "dcpm.cli", "keys", "reset-access", "--help"], env=wide, check=False,
                           capture_output=True, text=True, timeout=60).stdout
    assert "revoking keys or deleting their users never opens the daemon. With every key revoked" in shown
    shown = subprocess.run([sys.executable, "-m", "dcpm.cli", "serve", "--help"], env=wide, check=False,
                           capture_output=True, text=True, timeout=60).stdout
    assert "Requests must name the daemon in their Host header (loopback names, the bound address" in shown
