"""Headless Chromium driven over the DevTools protocol on a pipe (no extra package): load a page,
wait for what it renders, measure its layout, keep screenshots."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Self


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    assert found, "headless Chromium is needed for this test: apt-get install chromium (scripts/test does)"
    return found


class Browser:
    """One tab. `--remote-debugging-pipe` reads commands on fd 3 and writes answers on fd 4, NUL-separated."""

    def __init__(self, profile: Path, width: int = 1280, height: int = 900):
        to_chrome, self._commands = os.pipe()
        self._answers, from_chrome = os.pipe()
        to_chrome, from_chrome = (self._above_4(fd) for fd in (to_chrome, from_chrome))  # free 3 and 4 for Chromium
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--remote-debugging-pipe", f"--user-data-dir={profile}", "about:blank"]
        self._log = (profile.parent / "chromium.log").open("w")  # open as long as Chromium runs
        # bash, not sh: dash redirects only one-digit descriptors
        shell = f'exec "$0" "$@" 3<&{to_chrome} 4>&{from_chrome} {to_chrome}<&- {from_chrome}>&-'
        self.process = subprocess.Popen(["bash", "-c", shell, chromium(), *flags], pass_fds=(to_chrome, from_chrome),
                                        stdout=subprocess.DEVNULL, stderr=self._log)
        os.close(to_chrome)
        os.close(from_chrome)
        self._buffer = b""
        self._next_id = 0
        self.session = None
        self.events: list[dict] = []  # DevTools events (e.g. Network.requestWillBeSent once Network is enabled)
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.resize(width, height)
        self.call("Emulation.setScrollbarsHidden", hidden=True)  # screenshots show the page, not a scrollbar

    @staticmethod
    def _above_4(fd: int) -> int:
        moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 5)
        os.close(fd)
        return moved

    def call(self, method: str, timeout: float = 60, **params: Any) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if self.session:
            message["sessionId"] = self.session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            answer = self._receive(deadline)
            if "method" in answer:
                self.events.append(answer)
            elif answer.get("id") == self._next_id:
                assert "error" not in answer, f"{method}: {answer['error']}"
                return answer["result"]

    def _receive(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            assert left > 0 and select.select([self._answers], [], [], left)[0], "Chromium did not answer in time"
            chunk = os.read(self._answers, 1 << 20)
            assert chunk, "Chromium closed its DevTools pipe"
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def resize(self, width: int, height: int) -> None:
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def open(self, url: str) -> None:
        """A fresh load, even when only the #fragment differs from the page shown now."""
        self.call("Page.navigate", url="about:blank")
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'")

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        assert "exceptionDetails" not in result, f"{expression}: {result['exceptionDetails']}"
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                shown = self.evaluate("document.body ? document.body.innerText.slice(0, 1500) : ''")
                raise AssertionError(f"the page never got to: {expression}\nit shows:\n{shown}")
            time.sleep(0.2)

    def screenshot(self, path: Path) -> Path:
        """The whole page, not only the window."""
        size = self.call("Page.getLayoutMetrics")["cssContentSize"]
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                         clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1})
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def close(self) -> None:
        self.session = None
        try:
            self.call("Browser.close", timeout=10)
        except AssertionError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._commands)
        os.close(self._answers)
        self._log.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
