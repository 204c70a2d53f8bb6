"""The machinery shared by the fake model servers: a real HTTP server on 127.0.0.1 in a
thread, scripted answers chosen by conversation position, counters, injected failures and
a gate that holds requests in flight (see ``FakeModelServer``)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml


class FakeModelServer:
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
        self._lock = threading.Condition()
        self._open = threading.Event()
        self._open.set()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

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

    # -- life cycle -----------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        assert self._server is not None, "the server is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> FakeModelServer:
        handler = _make_handler(self)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- holding requests -----------------------------------------------------------------

    def hold(self) -> None:
        """Make new requests block inside the server until ``release()``."""
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def wait_for_in_flight(self, n: int = 1, *, timeout: float = 30.0) -> None:
        """Block until at least ``n`` requests are inside the server (held or answering)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self.in_flight < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{self.in_flight} of {n} requests arrived")
                self._lock.wait(left)

    def wait_for_count(self, n: int, *, timeout: float = 30.0) -> None:
        """Block until at least ``n`` requests were answered with a completion."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self.count < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{self.count} of {n} requests answered")
                self._lock.wait(left)

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


def usage_of(response: dict[str, Any]) -> tuple[int, int]:
    usage = response.get("usage") or {}
    return int(usage.get("in_tokens", 100)), int(usage.get("out_tokens", 20))


def _make_handler(server: FakeModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms stalls

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            if self.path.rstrip("/") != server.path:
                self._send(404, {}, {"error": {"message": f"no route {self.path}"}})
                return
            try:
                body = json.loads(raw)
            except ValueError:
                self._send(400, {}, {"error": {"message": "body is not JSON"}})
                return
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, extra, payload = server.handle(body, headers)
            self._send(status, extra, payload)

        def _send(self, status: int, extra: dict[str, str], payload: Any) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in extra.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client was killed mid-call; that is what some tests do

    return Handler
