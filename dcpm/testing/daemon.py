"""Real `dcpm serve` subprocesses, as the end-to-end tests and the HTTP benchmark start them: a
free port to give one, and the wait until it answers."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def not_ready(process: subprocess.Popen, url: str, log: Path, timeout: float, poll: float) -> str | None:
    """Wait until the daemon at `url` answers GET /healthz with 200: None then, else why not (it
    exited, or the time ran out), with its log, for the caller to raise as it reports failures."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return f"daemon exited early:\n{log.read_text()}"
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return None
        except httpx.HTTPError:
            pass
        time.sleep(poll)
    return f"daemon did not come up:\n{log.read_text()}"
