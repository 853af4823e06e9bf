"""Run `dcpm serve` and the `dcpm` CLI as a user would: real subprocesses on a free port."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from dcpm.testing.daemon import free_port, not_ready


def dcpm_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DCPM_")}
    env.update({"DCPM_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
    env.update(extra)
    return env


def run_cli(data_dir: Path, *args: str, check: bool = True, **env: str) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "dcpm.cli", *args], env=dcpm_env(data_dir, **env),
                            capture_output=True, text=True, timeout=300)
    if check and result.returncode != 0:
        raise AssertionError(f"dcpm {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    return result


def cli_json(data_dir: Path, *args: str):
    return json.loads(run_cli(data_dir, *args, "--json").stdout)


def mcp_stdio(data_dir: Path, *args: str, **env: str):  # type: ignore[no-untyped-def]
    """`dcpm mcp ARGS` as an MCP client launches it: a subprocess speaking MCP on stdin/stdout."""
    from mcp import StdioServerParameters

    return StdioServerParameters(command=sys.executable, args=["-m", "dcpm.cli", "mcp", *args],
                                 env=dcpm_env(data_dir, **env))


class Daemon:
    def __init__(self, data_dir: Path, **env: str):
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = env
        self.process: subprocess.Popen | None = None
        self.log = data_dir.parent / f"daemon-{self.port}.log"

    def start(self, timeout: float = 120) -> "Daemon":
        self.data_dir.mkdir(parents=True, exist_ok=True)
        handle = open(self.log, "w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "dcpm.cli", "serve", "--port", str(self.port), "--log-level", "warning"],
            env=dcpm_env(self.data_dir, **self.env), stdout=handle, stderr=subprocess.STDOUT)
        problem = not_ready(self.process, self.url, self.log, timeout, poll=0.3)
        if problem:
            raise AssertionError(problem)
        return self

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> "Daemon":
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


def settled(url: str, users: list[str], timeout: float = 240) -> None:
    """Wait until no turn is pending any more (the recovery loop drains the background adds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pending = sum(httpx.get(f"{url}/v1/users/{u}/items", params={"kind": "raw", "status": "pending"},
                                timeout=30).json()["total"] for u in users)
        if not pending:
            return
        time.sleep(1)
    raise AssertionError(f"{pending} turn(s) still pending after {timeout}s")
