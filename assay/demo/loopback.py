"""A scripted HTTP server on 127.0.0.1 in a background thread: the life cycle (start, url,
stop, context manager), the condition its counters are waited on under, and a quiet
request handler. The demo's upstream (``assay.demo.upstream``) and the tests' fake model
servers are both built on it."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet about clients that vanish (CLIs close idle connections, tests kill
        them mid-call); anything else is a bug in the fake and is printed."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class LoopbackServer:
    """Serve ``handler()`` on ``127.0.0.1:<port>`` from a daemon thread.

    ``_lock`` guards a subclass's counters; ``_wait`` blocks on it until a condition holds
    (whoever changes a counter calls ``_lock.notify_all()``).
    """

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def handler(self) -> type[BaseHTTPRequestHandler]:
        """The request handler class, bound to this server's state."""
        raise NotImplementedError

    def release(self) -> None:
        """Let go of any request held inside the server (called before stopping)."""

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        assert self._server is not None, "the server is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> Self:
        self._server = _Server(("127.0.0.1", 0), self.handler())
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

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _wait(self, ready: Callable[[], bool], timeout: float, say: Callable[[], str]) -> None:
        """Block until ``ready()`` (checked under the lock); ``TimeoutError(say())`` if not."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not ready():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(say())
                self._lock.wait(left)


class QuietHandler(BaseHTTPRequestHandler):
    """HTTP/1.1, no request log, and an answer a killed client cannot turn into a traceback."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms stalls

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def _send(
        self, status: int, kind: str, data: bytes, extra: dict[str, str] | None = None
    ) -> None:
        try:
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            for name, value in (extra or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client was killed mid-call; some tests do that


__all__ = ["LoopbackServer", "QuietHandler"]
