"""The daemon and CLI driven end to end, over HTTP and as subprocesses."""

from __future__ import annotations

import json

import httpx
import pytest

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
