"""The read-only admin page, loaded in headless Chromium: chains, graph and search reasons."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import httpx

from dcpm.testing.scripted_llm import LLMServer

from .daemon import Daemon, run_cli

ARTIFACTS = Path(__file__).parent / "artifacts"
TOKEN = "admin-s3cret"
TURNS = ["I went running before work on Monday morning", "I went running before work on Tuesday morning",
         "I went running before work on Thursday morning", "I drink two espressos every morning",
         "I switched from espresso to green tea"]


def supersede_coffee(items):
    decisions = []
    for n, (text, shown) in enumerate(items, 1):
        coffee = [handle for handle, old in shown if "espresso" in old]
        decisions.append({"item": n, "op": "SUPERSEDE", "target": coffee[0]} if coffee and "switched" in text
                         else {"item": n, "op": "ADD"})
    return {"decisions": decisions}


def running_schema(prompt: str):
    handles = re.findall(r"^\[(f\d+)\] \(\w+\) I went running", prompt, re.MULTILINE)
    if not handles:
        return []
    return [("create_schema", {"ref": "s1", "domain": "fitness", "text": "Ana runs before work",
                               "evidence": handles})]


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    assert found, "headless Chromium is needed for this test: apt-get install chromium (.ci/run does)"
    return found


def render(url: str, screenshot: Path) -> str:
    flags = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--virtual-time-budget=15000", "--window-size=1280,1100", f"--user-data-dir={screenshot.parent / 'chrome'}"]
    dom = subprocess.run(flags + ["--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
    subprocess.run(flags + [f"--screenshot={screenshot}", url], capture_output=True, timeout=120)
    return dom


def test_admin_page_shows_chains_graph_and_search_reasons(tmp_path):
    data_dir = tmp_path / "data"
    with LLMServer() as llm:
        llm.script.reconcile = supersede_coffee
        llm.script.induce = running_schema
        env = {"DCPM_LLM_BASE_URL": llm.url, "DCPM_LLM_MODEL": "scripted", "DCPM_API_TOKEN": TOKEN}
        with Daemon(data_dir, **env) as daemon:
            headers = {"Authorization": f"Bearer {TOKEN}"}
            for text in TURNS:
                httpx.post(f"{daemon.url}/v1/memories", headers=headers, timeout=60,
                           json={"user_id": "ana", "messages": [{"content": text, "name": "Ana"}]}).raise_for_status()
            run_cli(data_dir, "consolidate", "--user", "ana", DCPM_API_TOKEN=TOKEN)
            assert httpx.get(f"{daemon.url}/v1/users").status_code == 401  # the data needs the token
            ARTIFACTS.mkdir(exist_ok=True)
            screenshot = ARTIFACTS / "admin-page.png"
            dom = render(f"{daemon.url}/admin#token={TOKEN}&user=ana&q=coffee%20in%20the%20morning", screenshot)

    assert 'class="rev old"' in dom and "I drink two espressos every morning" in dom
    assert re.search(r'class="rev current".*I switched from espresso to green tea', dom)
    assert "Ana runs before work" in dom and "← I went running before work on Monday morning" in dom
    assert "believed now: I switched from espresso to green tea" in dom
    assert "dense" in dom and "lexical" in dom
    assert screenshot.stat().st_size > 10_000
