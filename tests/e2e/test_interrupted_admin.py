"""Operator commands cut short for real: an export whose write fails half-way, a reindex and a
hard delete killed with -9 at a chosen moment (a hook in the killed process itself). Whatever was
there before stays usable, and a delete is either done or not done."""

from __future__ import annotations

import json
import os
import resource
import stat
import subprocess
import sys

import httpx
import pytest

from .daemon import Daemon, dcpm_env, run_cli

NOTES = [f"Ana's note {n}: the plumber comes on day {n} to look at the boiler in flat {n * 3}" for n in range(300)]


def add_notes(url: str, user: str = "ana") -> None:
    for start in range(0, len(NOTES), 100):
        body = {"user_id": user, "infer": False, "messages": [{"content": text} for text in NOTES[start:start + 100]]}
        assert httpx.post(f"{url}/v1/memories", json=body, timeout=120).status_code == 201


def export_limited(data_dir, path, max_bytes: int) -> subprocess.CompletedProcess:
    """`dcpm export` in a process that may write no file larger than `max_bytes` (RLIMIT_FSIZE):
    the write of the export fails half-way, as on a disk that fills meanwhile."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))

    return subprocess.run([sys.executable, "-m", "dcpm.cli", "export", "ana", "-o", str(path)], preexec_fn=limit,
                          env=dcpm_env(data_dir, PYTHONDONTWRITEBYTECODE="1"), capture_output=True, text=True,
                          timeout=300)


def test_an_export_whose_write_fails_keeps_the_previous_export_whole_and_leaves_no_partial_file(tmp_path):
    data_dir, path = tmp_path / "data", tmp_path / "ana.jsonl"
    with Daemon(data_dir) as daemon:
        add_notes(daemon.url)
        run_cli(data_dir, "export", "ana", "-o", str(path))
        backup = path.read_bytes()
        failed = export_limited(data_dir, path, len(backup) // 2)  # through the daemon
    assert failed.returncode != 0 and "file too large" in failed.stderr.lower(), failed.stderr
    assert path.read_bytes() == backup and sorted(p.name for p in tmp_path.glob("ana.jsonl*")) == ["ana.jsonl"]

    failed = export_limited(data_dir, path, len(backup) // 2)  # no daemon: the command reads the store itself
    assert failed.returncode != 0 and "file too large" in failed.stderr.lower(), failed.stderr
    assert path.read_bytes() == backup and sorted(p.name for p in tmp_path.glob("ana.jsonl*")) == ["ana.jsonl"]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert json.loads(backup.split(b"\n", 1)[0])["manifest"]["counts"]["raw_input"] == len(NOTES)


KILL_INSIDE_RMTREE = """
import os, shutil, signal  # shutil first: it picks its fd-based rmtree by the real os.unlink
_unlink, _seen = os.unlink, [0]
def unlink(path, *args, dir_fd=None, **kwargs):
    if dir_fd is not None:  # shutil.rmtree removes a tree file by file through its directory's fd
        _seen[0] += 1
        if _seen[0] == {after}:
            os.kill(os.getpid(), signal.SIGKILL)
    return _unlink(path, *args, dir_fd=dir_fd, **kwargs)
os.unlink = unlink
"""


def test_a_reindex_killed_while_it_empties_an_old_index_leaves_one_that_opens_and_finds_everything(tmp_path):
    """`dcpm reindex` of an index of the old shared-IDF layout removes the shard before it
    rebuilds it: a kill -9 part-way through that removal (here after 20 of its files) must leave
    no half a shard that no later start, reindex included, can open."""
    data_dir, hooks = tmp_path / "data", tmp_path / "hooks"
    with Daemon(data_dir) as daemon:
        add_notes(daemon.url)
    record = json.loads((data_dir / "vectors.json").read_text())
    record.pop("idf")  # an index built before IDF per user: reindex empties it first
    (data_dir / "vectors.json").write_text(json.dumps(record))
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(KILL_INSIDE_RMTREE.format(after=20))
    killed = run_cli(data_dir, "reindex", check=False, PYTHONPATH=os.pathsep.join([str(hooks), *sys.path]))
    assert killed.returncode == -9, killed.stderr

    with Daemon(data_dir) as daemon:  # the next start opens an index, and start-up repair fills it
        health = httpx.get(f"{daemon.url}/healthz", timeout=30).json()
        assert health["index"]["points"] == len(NOTES)
        found = httpx.post(f"{daemon.url}/v1/search", json={"user_id": "ana", "query": NOTES[123], "limit": 1},
                           timeout=60).json()
        assert found["hits"][0]["text"] == NOTES[123]
    assert "reindexed 300 point(s)" in run_cli(data_dir, "reindex").stdout


KILL_AT_INDEX_DELETE = """
import os, signal
from dcpm.index.edge import EdgeIndex
_delete, _calls = EdgeIndex.delete, [0]
def delete(self, ids):
    _calls[0] += 1
    if _calls[0] == {call} and "{when}" == "before":
        os.kill(os.getpid(), signal.SIGKILL)
    _delete(self, ids)
    if _calls[0] == {call} and "{when}" == "after":
        os.kill(os.getpid(), signal.SIGKILL)
EdgeIndex.delete = delete
"""


@pytest.mark.parametrize("call,when,done", [(1, "after", False)], ids=["vectors-gone-rows-not-yet"])
def test_a_user_delete_killed_mid_way_is_either_done_or_not_done_after_a_restart(tmp_path, call, when, done):
    """`dcpm delete --user bob` removes bob's vectors, commits the rows' removal, then removes the
    vectors once more: a kill -9 before the commit leaves bob whole and searchable again after a
    restart (the delete did not happen and can be run again), one after it leaves nothing of bob."""
    data_dir, hooks = tmp_path / "data", tmp_path / "hooks"
    with Daemon(data_dir) as daemon:
        add_notes(daemon.url, "ana"), add_notes(daemon.url, "bob")
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(KILL_AT_INDEX_DELETE.format(call=call, when=when))
    killed = run_cli(data_dir, "delete", "--user", "bob", "--yes", check=False,
                     PYTHONPATH=os.pathsep.join([str(hooks), *sys.path]))
    assert killed.returncode == -9, killed.stderr

    with Daemon(data_dir) as daemon:
        users = {u["id"] for u in httpx.get(f"{daemon.url}/v1/users", timeout=30).json()}
        points = httpx.get(f"{daemon.url}/healthz", timeout=30).json()["index"]["points"]
        assert users == ({"ana"} if done else {"ana", "bob"})
        assert points == len(NOTES) * (1 if done else 2)  # no row without its vector, no vector without its row
        assert found(daemon.url, "bob", NOTES[42])[:1] == ([] if done else [NOTES[42]])
        if not done:  # run again, it deletes bob for good
            assert httpx.delete(f"{daemon.url}/v1/users/bob", timeout=60).status_code == 200
            assert found(daemon.url, "bob", NOTES[42]) == []


def found(url: str, user: str, query: str) -> list[str]:
    """The texts a search finds; none for a user the store no longer knows (404)."""
    response = httpx.post(f"{url}/v1/search", json={"user_id": user, "query": query, "limit": 3}, timeout=60)
    assert response.status_code in (200, 404), response.text
    return [hit["text"] for hit in response.json()["hits"]] if response.status_code == 200 else []
