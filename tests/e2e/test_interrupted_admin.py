"""Operator commands cut short for real: an export whose write fails half-way, a reindex killed
with -9 while it empties an index it must rebuild. Whatever was there before stays usable."""

from __future__ import annotations

import json
import os
import resource
import stat
import subprocess
import sys

import httpx

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
