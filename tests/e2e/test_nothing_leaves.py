"""README, Privacy: no telemetry; nothing leaves the machine except calls to the LLM endpoint the
operator configured. The daemon and the CLI run as a user runs them, in an environment that
invites every leak we know of: OpenTelemetry's variables all point at a trap and FastAPI is told
to configure it, Hugging Face's offline switch is off and its hub address is the trap. An audit
hook (sys.addaudithook, loaded by a sitecustomize on PYTHONPATH) records every address a Python
socket resolves or connects to; the trap counts what native code (gRPC, Rust) might send it. The
OpenAPI pages are opened in headless Chromium, which reports every request the page makes."""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path

import httpx

from dcpm.testing.scripted_llm import LLMServer

from .browser import Browser
from .daemon import Daemon, run_cli, settled

AUDIT_HOOK = '''
import json, os, sys

def _record(event, args):
    if event in ("socket.connect", "socket.sendto"):
        address = args[1]
    elif event == "socket.getaddrinfo":
        address = args[:2]
    else:
        return
    host, port = (address[0], address[1]) if isinstance(address, tuple) and len(address) >= 2 else (address, None)
    line = json.dumps({"pid": os.getpid(), "event": event, "host": str(host), "port": port}, default=str)
    fd = os.open(os.environ["DCPM_TEST_NETWORK_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, (line + "\\n").encode())
    finally:
        os.close(fd)

sys.addaudithook(_record)
'''
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


class Trap:
    """A TCP port that only counts who connects to it."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def __enter__(self) -> "Trap":
        return self

    def __exit__(self, *_: object) -> None:
        self.server.close()


def leaky_environment(hook_dir: Path, network_log: Path, trap: Trap, llm_url: str) -> dict[str, str]:
    endpoint = f"http://127.0.0.1:{trap.port}"
    return {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(hook_dir), os.environ.get("PYTHONPATH", "")])),
        "DCPM_TEST_NETWORK_LOG": str(network_log),
        "DCPM_LLM_BASE_URL": llm_url, "DCPM_LLM_MODEL": "scripted", "DCPM_CONSOLIDATION_SCHEDULE": "false",
        "FASTAPI_OTEL_AUTO_CONFIGURE": "true", "OTEL_SDK_DISABLED": "false", "OTEL_SERVICE_NAME": "dcpm",
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "otlp", "OTEL_LOGS_EXPORTER": "otlp",
        "HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "0", "HF_ENDPOINT": endpoint,
        "HF_HUB_DISABLE_TELEMETRY": "0", "DO_NOT_TRACK": "0",
    }


def test_the_daemon_and_cli_connect_only_to_the_llm_endpoint(tmp_path):
    hook_dir = tmp_path / "hook"
    hook_dir.mkdir()
    (hook_dir / "sitecustomize.py").write_text(AUDIT_HOOK)
    network_log = tmp_path / "network.jsonl"
    history = tmp_path / "history.jsonl"
    history.write_text("".join(json.dumps({"user_id": "ana", "speaker": "Ana", "text": text}) + "\n" for text in (
        "I booked the ferry to Mull for the second week of June", "My knee still clicks when I take the stairs")))
    data_dir = tmp_path / "data"
    with Trap() as trap, LLMServer() as llm:
        env = leaky_environment(hook_dir, network_log, trap, llm.url)
        with Daemon(data_dir, **env) as daemon:
            assert json.loads(run_cli(data_dir, "import", str(history), "--json", **env).stdout)["imported"] == 2
            added = httpx.post(f"{daemon.url}/v1/memories", timeout=60, json={
                "user_id": "ana", "text": "I started volunteering at the seal rescue on Saturdays"})
            assert added.status_code < 300, added.text
            settled(daemon.url, ["ana"], timeout=120)
            hits = httpx.post(f"{daemon.url}/v1/search", json={"user_id": "ana", "query": "ferry trip"},
                              timeout=30).json()["hits"]
            assert hits and "ferry" in hits[0]["text"]
            run_cli(data_dir, "consolidate", "--user", "ana", **env)
            for page in ("/docs", "/redoc", "/openapi.json", "/admin", "/healthz", "/metrics",
                         "/docs/assets/swagger-ui-bundle.js"):
                assert httpx.get(f"{daemon.url}{page}", timeout=30).status_code == 200, page
        llm_port = int(llm.url.split(":")[2].split("/")[0])
        assert llm.script.calls, "the writer never called the LLM: the test would prove nothing"

    seen = [json.loads(line) for line in network_log.read_text().splitlines()]
    # The hook works: it saw the writer reach the LLM, and the CLI reach the daemon.
    assert any(e["event"] == "socket.connect" and e["port"] == llm_port for e in seen)
    assert any(e["event"] == "socket.connect" and e["port"] == daemon.port for e in seen)
    allowed_ports = {llm_port, daemon.port, None, 0, str(llm_port), str(daemon.port)}
    elsewhere = [e for e in seen if e["host"] not in LOOPBACK or e["port"] not in allowed_ports]
    assert not elsewhere, f"connections beyond the LLM endpoint: {elsewhere}"
    assert trap.connections == 0, "something sent telemetry or asked a model hub"


def test_the_openapi_pages_render_offline_from_the_daemon_alone(tmp_path):
    data_dir = tmp_path / "data"
    with Daemon(data_dir) as daemon, Browser(tmp_path / "profile") as browser:
        browser.call("Network.enable")
        browser.open(f"{daemon.url}/docs")
        operations = browser.wait_for("document.querySelectorAll('.opblock').length")
        assert operations > 20
        assert "/v1/search" in browser.evaluate("document.body.innerText")
        browser.open(f"{daemon.url}/redoc")
        browser.wait_for("document.querySelectorAll('[data-section-id^=\"operation/\"]').length > 20")
        assert "Search" in browser.evaluate("document.body.innerText")
    requested = {e["params"]["requestId"]: e["params"]["request"]["url"] for e in browser.events
                 if e["method"] == "Network.requestWillBeSent"}
    assert f"{daemon.url}/docs/assets/swagger-ui-bundle.js" in requested.values()
    # ReDoc's sidebar always asks cdn.redoc.ly for its logo: the page's policy must stop it in the browser.
    stopped = {e["params"]["requestId"] for e in browser.events
               if e["method"] == "Network.loadingFailed" and e["params"].get("blockedReason") == "csp"}
    foreign = [url for request, url in requested.items()
               if not url.startswith((daemon.url, "data:", "blob:", "about:")) and request not in stopped]
    assert not foreign, f"the pages fetched from elsewhere: {foreign}"

