"""The daemon and CLI driven end to end, over HTTP and as subprocesses."""

from __future__ import annotations

import json
import math
import subprocess
from contextlib import nullcontext

import httpx
import pytest

from dcpm.testing.daemon import free_port

from .daemon import Daemon, cli_json, run_cli

HISTORY = [
    {"user_id": "ana", "speaker": "Ana", "session_id": "s1", "timestamp": "2025-01-05T09:00:00Z",
     "text": "I finally adopted a greyhound, her name is Pepper"},
    {"user_id": "ana", "speaker": "Ana", "session_id": "s1", "timestamp": "2025-01-05T09:01:00Z",
     "text": "She is terrified of the hoover, so I vacuum when she is out with my brother"},
    {"user_id": "ana", "speaker": "Ana", "session_id": "s2", "timestamp": "2025-02-11T18:30:00Z",
     "text": "The audit at the bank is finally over, I am taking Friday off"},
    {"user_id": "bob", "speaker": "Bob", "session_id": "b1", "timestamp": "2025-01-06T20:00:00Z",
     "text": "My dog Biscuit chewed through the sofa cushion again"},
    {"user_id": "bob", "speaker": "Bob", "session_id": "b1", "timestamp": "2025-01-06T20:02:00Z",
     "text": "Thinking of signing up for the Kraków triathlon in August"},
]
QUERIES = ["What is the name of the dog?", "vacuum cleaner", "time off work", "race in summer"]


@pytest.fixture
def history(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in HISTORY) + "\n")
    return path


def search(url: str, user: str, query: str) -> list[dict]:
    response = httpx.post(f"{url}/v1/search", json={"user_id": user, "query": query, "limit": 5}, timeout=30)
    response.raise_for_status()
    return response.json()["hits"]


def test_daemon_serves_two_users_refuses_bad_input_and_survives_a_restart(tmp_path, history):
    data_dir = tmp_path / "data"
    with Daemon(data_dir) as daemon:
        report = cli_json(data_dir, "import", str(history))  # goes through the daemon's API
        assert report["imported"] == len(HISTORY)
        assert cli_json(data_dir, "import", str(history))["imported"] == 0  # idempotent re-run

        ana = search(daemon.url, "ana", "What is the name of the dog?")
        assert ana[0]["text"] == "I finally adopted a greyhound, her name is Pepper"
        bob = search(daemon.url, "bob", "What is the name of the dog?")
        assert bob[0]["text"] == "My dog Biscuit chewed through the sofa cushion again"
        for query in QUERIES:
            assert all(hit["speaker"] == "Ana" for hit in search(daemon.url, "ana", query))
            assert all(hit["speaker"] == "Bob" for hit in search(daemon.url, "bob", query))

        for bad in ({"user_id": "ana", "text": ""}, {"user_id": "ana bob", "text": "hi"}, {"text": "hi"}):
            response = httpx.post(f"{daemon.url}/v1/memories", json=bad, timeout=30)
            assert 400 <= response.status_code < 500 and response.json()["message"]
        garbled = httpx.post(f"{daemon.url}/v1/memories", content=b"\xff\xfe{", timeout=30,
                             headers={"content-type": "application/json"})
        assert garbled.status_code == 400 and garbled.json()["message"]
        assert httpx.get(f"{daemon.url}/v1/users/ana/items", params={"kind": "raw"}).json()["total"] == 3

        before = {q: [h["id"] for h in search(daemon.url, "ana", q)] for q in QUERIES}

    with Daemon(data_dir) as daemon:
        after = {q: [h["id"] for h in search(daemon.url, "ana", q)] for q in QUERIES}
    assert after == before


def test_cli_reads_the_same_with_and_without_a_daemon(tmp_path, history):
    data_dir = tmp_path / "data"
    run_cli(data_dir, "import", str(history))
    direct = cli_json(data_dir, "search", "bob", "triathlon")
    with Daemon(data_dir):
        assert "in use by a daemon" not in run_cli(data_dir, "users").stderr
        via_daemon = cli_json(data_dir, "search", "bob", "triathlon")
        users = cli_json(data_dir, "users")
    assert [h["id"] for h in via_daemon["hits"]] == [h["id"] for h in direct["hits"]]
    assert sorted(u["id"] for u in users) == ["ana", "bob"]


def test_cli_errors_have_messages_and_exit_codes(tmp_path):
    data_dir = tmp_path / "data"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"user_id": "ana", "text": "fine"}\n{"user_id": "ana"}\n')
    result = run_cli(data_dir, "import", str(bad), check=False)
    assert result.returncode == 2 and "line 2" in result.stderr
    result = run_cli(data_dir, "search", "nobody", "anything", check=False)
    assert result.returncode == 4 and "unknown user" in result.stderr
    result = run_cli(data_dir, "show", "not-an-id", check=False)
    assert result.returncode == 2


def refused(result: subprocess.CompletedProcess, exit_code: int, message: str) -> None:
    """What a user sees of bad input: the exit code and one line that says what is wrong, never a traceback."""
    assert (result.returncode, len(result.stderr.strip().splitlines())) == (exit_code, 1), result.stderr
    assert message in result.stderr


@pytest.mark.parametrize("served", [False, True], ids=["direct", "daemon"])
def test_paths_and_ids_a_command_cannot_use_are_refused_with_a_message(tmp_path, history, served):
    data_dir = tmp_path / "data"
    run_cli(data_dir, "import", str(history))
    missing, nowhere = tmp_path / "missing.jsonl", tmp_path / "gone" / "ana.jsonl"
    zero = "00000000-0000-0000-0000-000000000000"
    with Daemon(data_dir) if served else nullcontext():
        stored = cli_json(data_dir, "items", "ana", "--kind", "raw")
        refused(run_cli(data_dir, "restore", str(tmp_path), check=False), 2, f"{tmp_path} is a directory, not a file")
        refused(run_cli(data_dir, "restore", str(missing), check=False), 2, f"no such file: {missing}")
        refused(run_cli(data_dir, "restore", "x" * 300, check=False), 2, "file name too long")
        refused(run_cli(data_dir, "export", "ana", "-o", str(nowhere), check=False), 2,
                f"no such directory: {nowhere.parent}")
        refused(run_cli(data_dir, "export", "ana", "-o", str(tmp_path), check=False), 2, f"{tmp_path} is a directory")
        refused(run_cli(data_dir, "import", str(tmp_path), check=False), 2, f"{tmp_path} is a directory, not a file")
        refused(run_cli(data_dir, "show", "", check=False), 2, "'' is not a memory or graph node id")
        refused(run_cli(data_dir, "show", zero, check=False), 4, f"no memory or graph node with id {zero}")
        refused(run_cli(data_dir, "history", "", check=False), 2, "'' is not a")
        refused(run_cli(data_dir, "delete", "--user", "ana", "--session", "", "--yes", check=False), 2,
                "'' is not an id: it is empty")
        assert cli_json(data_dir, "items", "ana", "--kind", "raw") == stored
    assert not nowhere.parent.exists() and not list(tmp_path.glob("*.part"))


def test_a_data_directory_that_cannot_be_one_is_refused_with_a_message(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("Ana's own notes")
    for command in (["users"], ["items", "ana"], ["health"], ["serve", "--port", str(free_port())]):
        refused(run_cli(notes, *command, check=False), 2, f"cannot use {notes} as the data directory: it is a file")
        refused(run_cli(notes / "data", *command, check=False), 2,
                f"cannot use {notes / 'data'} as the data directory: a part of its path is a file")
    assert notes.read_text() == "Ana's own notes"


def test_an_import_line_the_store_cannot_keep_is_refused_up_front_by_line(tmp_path):
    data_dir = tmp_path / "data"
    lines = [{"user_id": "ana", "text": "I switched from coffee to green tea"},
             {"user_id": "ana", "text": "tea \ud800"},
             {"user_id": "ana", "text": "deep", "metadata": json.loads('{"a": ' * 600 + "1" + "}" * 600)},
             {"user_id": "ana", "text": "nan", "metadata": {"n": math.nan}},
             {"user_id": "ana", "text": "inf", "metadata": {"n": [math.inf]}}]
    path = tmp_path / "history.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    result = run_cli(data_dir, "import", str(path), check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "4 bad line(s)" in result.stderr and "nothing was imported" in result.stderr
    for number, problem in ((2, "not valid Unicode"), (3, "nested deeper than 32 levels"), (4, "holds nan"),
                            (5, "holds inf")):
        assert f"line {number}: " in result.stderr and problem in result.stderr.split(f"line {number}: ")[1]
    assert cli_json(data_dir, "users") == []


def test_a_bad_setting_is_refused_by_name_on_one_line(tmp_path):
    data_dir = tmp_path / "data"
    refused(run_cli(data_dir, "config", "show", check=False, DCPM_HYBRID_ALPHA="2"), 2,
            "bad settings: hybrid_alpha: Input should be less than or equal to 1")
    refused(run_cli(data_dir, "users", check=False, DCPM_CONSOLIDATION_CRON="garbage"), 2,
            "bad settings: consolidation_cron: 'garbage' is not a crontab expression")
    refused(run_cli(data_dir, "users", check=False, DCPM_DATABASE_URL="bogus://dcpm:hunter2@db/dcpm"), 2,
            "bad settings: database_url: SQLAlchemy knows no database 'bogus'")
    toml = tmp_path / "dcpm.toml"
    toml.write_text("hybrid_alpha = 0.6\nhybird_alpha = 0.7\n")
    refused(run_cli(data_dir, "--config", str(toml), "config", "show", check=False), 2,
            "bad settings: hybird_alpha: not a dcpm setting")
    assert not data_dir.exists()  # refused before anything was made


def test_a_second_daemon_on_the_same_data_dir_is_refused(tmp_path):
    data_dir = tmp_path / "data"
    with Daemon(data_dir):
        second = Daemon(data_dir)
        with pytest.raises(AssertionError, match="in use"):
            second.start(timeout=60)


def test_a_daemon_stopped_with_sigterm_leaves_no_deleted_point_behind(tmp_path):
    """systemd and `docker stop` send SIGTERM: the daemon closes as for Ctrl-C, so the vector
    shard is compacted (a deleted user's session id and metadata leave its files), daemon.json
    goes and the exit is clean. It used to die inside uvicorn before any of that ran. A transfer
    a crash cut short is cleared at start."""
    data_dir = tmp_path / "data"
    marker = "SIGTERM-8890-PLUM"
    leftover = data_dir / ".transfer-x1y2" / "restore.jsonl"  # an export a crash cut short
    leftover.parent.mkdir(parents=True)
    leftover.write_text(f'{{"text": "{marker}"}}')
    daemon = Daemon(data_dir).start()
    assert not leftover.parent.exists()
    added = httpx.post(f"{daemon.url}/v1/memories", timeout=30, json={
        "user_id": "frank", "text": "The spare key is under the heron statue", "infer": False,
        "session_id": marker, "metadata": {"note": marker}})
    assert added.status_code == 201
    assert httpx.delete(f"{daemon.url}/v1/users/frank", timeout=30).status_code == 200
    daemon.process.terminate()
    assert daemon.process.wait(timeout=60) == 0
    assert not (data_dir / "daemon.json").exists() and not (data_dir / "vectors.purge-pending").exists()
    leftovers = [path for path in (data_dir / "vectors").rglob("*")
                 if path.is_file() and marker.encode() in path.read_bytes()]
    assert leftovers == []
