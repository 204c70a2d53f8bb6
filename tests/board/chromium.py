"""Headless Chromium driven over the DevTools protocol, for tests of the HTML board.

Starts Debian's ``chromium`` with a fresh profile and ``--remote-debugging-port=0``, reads
the port it chose from ``DevToolsActivePort``, and talks to the page over a websocket:
navigate, collect console errors, exceptions and failed loads, evaluate an expression,
capture a screenshot.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
from websockets.sync.client import ClientConnection, connect

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--remote-debugging-port=0",
    "--remote-allow-origins=*",
    "--window-size=1280,900",
)


def chromium_binary() -> str:
    found = shutil.which("chromium")
    assert found, "Debian's chromium is required (.ci/install installs it)"
    return found


class Browser:
    """One headless Chromium process and a DevTools session on its first page."""

    def __init__(self, profile: Path, *, deadline_s: float = 60.0) -> None:
        profile.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [chromium_binary(), *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.errors: list[str] = []
        self._next_id = 0
        self._stack = contextlib.ExitStack()
        self._stack.callback(self._stop_process)
        try:
            self._connect(profile, deadline_s)
        except BaseException:
            self._stack.close()
            raise

    def _connect(self, profile: Path, deadline_s: float) -> None:
        deadline = time.monotonic() + deadline_s
        port_file = profile / "DevToolsActivePort"
        port = 0
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "chromium exited at start-up"
            lines = port_file.read_text().splitlines() if port_file.exists() else []
            if lines and lines[0].strip().isdigit():
                port = int(lines[0])
                break
            time.sleep(0.05)  # polling a file Chromium writes; the deadline bounds it
        assert port, "chromium did not report its DevTools port in time"
        with httpx.Client(trust_env=False, timeout=10) as client:
            targets: list[dict[str, Any]] = []
            while time.monotonic() < deadline:
                targets = [
                    t
                    for t in client.get(f"http://127.0.0.1:{port}/json/list").json()
                    if t.get("type") == "page"
                ]
                if targets:
                    break
                time.sleep(0.05)
        assert targets, "chromium has no page target"
        self.socket: ClientConnection = self._stack.enter_context(
            connect(targets[0]["webSocketDebuggerUrl"], max_size=None, open_timeout=20)
        )
        for domain in ("Runtime", "Log", "Page"):
            self.call(f"{domain}.enable")

    def _note(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        params = message.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in {"error", "assert"}:
            texts = [str(arg.get("value", arg.get("description", ""))) for arg in params["args"]]
            self.errors.append("console: " + " ".join(texts))
        elif method == "Runtime.exceptionThrown":
            self.errors.append("exception: " + json.dumps(params.get("exceptionDetails", {})))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.errors.append("log: " + str(params["entry"].get("text", "")))

    def _receive(self, timeout: float) -> dict[str, Any]:
        message: dict[str, Any] = json.loads(self.socket.recv(timeout=timeout))
        self._note(message)
        return message

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._next_id += 1
        ident = self._next_id
        self.socket.send(json.dumps({"id": ident, "method": method, "params": params or {}}))
        while True:
            message = self._receive(timeout=30)
            if message.get("id") == ident:
                assert "error" not in message, message["error"]
                result: dict[str, Any] = message.get("result", {})
                return result

    def open(self, url: str) -> None:
        """Navigate and wait for the load event."""
        self.call("Page.navigate", {"url": url})
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self._receive(timeout=30).get("method") == "Page.loadEventFired":
                return
        raise AssertionError(f"{url} did not finish loading")

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def settle(self) -> None:
        """Let late console messages arrive: a round trip after everything queued before it."""
        self.evaluate("1")

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        path.write_bytes(base64.b64decode(data["data"]))
        return path

    def _stop_process(self) -> None:
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)  # its own session: only its children
            self.process.wait(timeout=15)

    def close(self) -> None:
        # The browser may drop the socket before it answers Browser.close.
        with contextlib.suppress(Exception):
            self.call("Browser.close")
        self._stack.close()

    def __enter__(self) -> Browser:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()
