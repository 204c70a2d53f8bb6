"""The machinery shared by the fake model servers: a real HTTP server on 127.0.0.1 in a
thread, scripted answers chosen by conversation position, counters, injected failures and
a gate that holds requests in flight (see ``FakeModelServer``)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import yaml

from assay.demo.loopback import LoopbackServer, QuietHandler


class FakeModelServer(LoopbackServer):
    """A scripted model API on ``127.0.0.1:<port>``, served from a background thread.

    ``responses`` are dicts in the scripted-model shape (``content``, ``tool_calls`` as
    ``[{name, arguments}]``, optional ``usage: {in_tokens, out_tokens}``). Subclasses turn
    them into one API's wire format.

    Options:
    - ``by``: ``"turns"`` (default) answers response ``k`` where ``k`` is the number of
      assistant turns in the request, so a resumed conversation gets the same answer;
      ``"count"`` answers by the order requests arrive.
    - ``fail_first``: answer the first N requests with ``fail_status`` (default 429) and a
      ``retry-after: <retry_after>`` header before answering normally.
    - ``hold()`` / ``release()``: while held, requests block inside the server (use
      ``wait_for_in_flight(n)`` to know one arrived, e.g. to SIGKILL a client mid-call).

    Counters (thread-safe): ``received`` (every request), ``failures_sent`` (injected
    errors), ``count`` (requests answered with a completion), ``requests`` (JSON bodies
    answered, in order), ``headers`` (their headers, lower-cased names).
    """

    path = "/"

    def __init__(
        self,
        responses: list[dict[str, Any]] | None = None,
        *,
        by: str = "turns",
        fail_first: int = 0,
        fail_status: int = 429,
        retry_after: str | None = "0",
        model: str = "fake-model",
    ) -> None:
        super().__init__()
        self.responses = list(responses or [])
        self.by = by
        self.fail_first = fail_first
        self.fail_status = fail_status
        self.retry_after = retry_after
        self.model = model
        self.received = 0
        self.failures_sent = 0
        self.count = 0
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self._open = threading.Event()
        self._open.set()

    @classmethod
    def from_script(cls, path: Path, **options: Any) -> FakeModelServer:
        """A server answering with a scripted-model YAML file's ``responses``."""
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        return cls(data["responses"], **options)

    # -- to be provided by each API -------------------------------------------------------

    def assistant_turns(self, body: dict[str, Any]) -> int:
        raise NotImplementedError

    def render(self, response: dict[str, Any], turn: int) -> dict[str, Any]:
        raise NotImplementedError

    # -- life cycle (``url``, ``start``, ``stop``: ``LoopbackServer``) ----------------------

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return type("Handler", (_Handler,), {"server_state": self})

    # -- holding requests -----------------------------------------------------------------

    def hold(self) -> None:
        """Make new requests block inside the server until ``release()``."""
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def wait_for_in_flight(self, n: int = 1, *, timeout: float = 30.0) -> None:
        """Block until at least ``n`` requests are inside the server (held or answering)."""
        self._wait(
            lambda: self.in_flight >= n,
            timeout,
            lambda: f"{self.in_flight} of {n} requests arrived",
        )

    def wait_for_count(self, n: int, *, timeout: float = 30.0) -> None:
        """Block until at least ``n`` requests were answered with a completion."""
        self._wait(
            lambda: self.count >= n, timeout, lambda: f"{self.count} of {n} requests answered"
        )

    # -- one request ----------------------------------------------------------------------

    def handle(
        self, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, dict[str, str], Any]:
        with self._lock:
            self.received += 1
            self.in_flight += 1
            self._lock.notify_all()
            fail = self.failures_sent < self.fail_first
            if fail:
                self.failures_sent += 1
        try:
            if fail:
                extra = {"retry-after": self.retry_after} if self.retry_after is not None else {}
                return self.fail_status, extra, {"error": {"message": "injected failure"}}
            self._open.wait()
            with self._lock:
                turn = self.assistant_turns(body) if self.by == "turns" else self.count
                if turn >= len(self.responses):
                    return 400, {}, {"error": {"message": f"no scripted response {turn + 1}"}}
                self.count += 1
                self.requests.append(body)
                self.headers.append(headers)
                self._lock.notify_all()
            return 200, {}, self.render(self.responses[turn], turn)
        finally:
            with self._lock:
                self.in_flight -= 1
                self._lock.notify_all()


class _Handler(QuietHandler):
    server_state: FakeModelServer  # bound by ``FakeModelServer.handler``

    def do_POST(self) -> None:
        server = self.server_state
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        if self.path.rstrip("/") != server.path:
            self._json(404, {}, {"error": {"message": f"no route {self.path}"}})
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._json(400, {}, {"error": {"message": "body is not JSON"}})
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        status, extra, payload = server.handle(body, headers)
        self._json(status, extra, payload)

    def _json(self, status: int, extra: dict[str, str], payload: Any) -> None:
        self._send(status, "application/json", json.dumps(payload).encode(), extra)
