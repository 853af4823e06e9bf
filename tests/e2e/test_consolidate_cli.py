"""`dcpm consolidate` asks the daemon that owns the data directory to run the job."""

from __future__ import annotations

import json
import re

import httpx

from dcpm.testing.scripted_llm import LLMServer

from .daemon import Daemon, cli_json, run_cli

TURNS = ["I went running before work on Monday morning", "I went running before work on Tuesday morning",
         "I went running before work on Thursday morning", "I went running before work on Friday morning"]


def one_schema(prompt: str):
    handles = re.findall(r"^\[(f\d+)\]", prompt, re.MULTILINE)
    return [("create_schema", {"ref": "s1", "domain": "fitness", "text": "Ana runs before work, rain or shine",
                               "evidence": handles})]


def test_consolidate_through_the_daemon_builds_the_graph_and_search_shows_it(tmp_path):
    data_dir = tmp_path / "data"
    with LLMServer() as llm:
        llm.script.induce = one_schema
        env = {"DCPM_LLM_BASE_URL": llm.url, "DCPM_LLM_MODEL": "scripted"}
        with Daemon(data_dir, **env) as daemon:
            for text in TURNS:
                response = httpx.post(f"{daemon.url}/v1/memories", timeout=60,
                                      json={"user_id": "ana", "messages": [{"content": text, "name": "Ana"}]})
                assert response.json()["status"] == "done"
            runs = cli_json(data_dir, "consolidate", "--user", "ana")
            assert [r["status"] for r in runs] == ["done"] and runs[0]["counts"].get("nodes_created") == 1, runs
            graph = json.loads(run_cli(data_dir, "graph", "ana", "--format", "json").stdout)
            assert [n["text"] for n in graph["nodes"]] == ["Ana runs before work, rain or shine"]
            assert len(graph["nodes"][0]["evidence"]) == 4
            assert "digraph" in run_cli(data_dir, "graph", "ana", "--format", "dot").stdout
            hits = httpx.post(f"{daemon.url}/v1/search", json={"user_id": "ana", "query": "a run before work"}).json()
            assert hits["nodes"][0]["text"] == "Ana runs before work, rain or shine"
            assert cli_json(data_dir, "runs")[0]["status"] == "done"
            assert run_cli(data_dir, "consolidate", check=False).returncode == 2  # neither --user nor --all
