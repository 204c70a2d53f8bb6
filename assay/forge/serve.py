"""Serve an embedded forge over smart HTTP: git's own ``http-backend`` behind a small server.

The server answers only for the one repository it was given (``/<name>/...``), enables
``receive-pack`` (pushes) through the environment rather than the repository's config, and
spools request and response bodies through temporary files so a large push or clone does
not sit in memory. It binds to 127.0.0.1 unless told otherwise; port 0 picks a free port.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from assay.errors import BadInput
from assay.forge.embedded import is_forge

LOG = logging.getLogger("assay.forge.serve")

HTTP_BACKEND_CANDIDATES = (
    "/usr/lib/git-core/git-http-backend",
    "/usr/libexec/git-core/git-http-backend",
    "/usr/local/libexec/git-core/git-http-backend",
)


def find_http_backend() -> str:
    """The path of ``git-http-backend`` (asks ``git --exec-path`` first)."""
    try:
        exec_path = subprocess.run(
            ["git", "--exec-path"], capture_output=True, text=True, check=True, timeout=30
        ).stdout.strip()
        candidate = os.path.join(exec_path, "git-http-backend")
        if os.access(candidate, os.X_OK):
            return candidate
    except (OSError, subprocess.SubprocessError):
        pass
    for candidate in HTTP_BACKEND_CANDIDATES:
        if os.access(candidate, os.X_OK):
            return candidate
    raise BadInput("cannot serve: git-http-backend is not installed")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], forge: ForgeServer) -> None:
        self.forge = forge
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        LOG.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        self._backend()

    def do_POST(self) -> None:
        self._backend()

    def _read_body(self, sink: IO[bytes]) -> None:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return
                sink.write(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        remaining = length
        while remaining > 0:
            chunk = self.rfile.read(min(remaining, 1 << 16))
            if not chunk:
                break
            sink.write(chunk)
            remaining -= len(chunk)

    def _backend(self) -> None:
        forge = self.server.forge
        path, _, query = self.path.partition("?")
        prefix = f"/{forge.name}/"
        if not path.startswith(prefix) or ".." in path:
            self.send_error(404, "no such repository")
            return
        with tempfile.TemporaryFile() as body, tempfile.TemporaryFile() as output:
            self._read_body(body)
            body_length = body.tell()
            body.seek(0)
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "GIT_PROJECT_ROOT": str(forge.path.parent),
                "GIT_HTTP_EXPORT_ALL": "1",
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_CONFIG_COUNT": "1",
                "GIT_CONFIG_KEY_0": "http.receivepack",
                "GIT_CONFIG_VALUE_0": "true",
                "REQUEST_METHOD": self.command,
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(body_length),
                "REMOTE_ADDR": self.client_address[0],
                "REMOTE_USER": "assay",
                "SERVER_PROTOCOL": "HTTP/1.0",
                "GATEWAY_INTERFACE": "CGI/1.1",
                "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
                "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
            }
            done = subprocess.run(
                [forge.backend],
                stdin=body,
                stdout=output,
                stderr=subprocess.PIPE,
                env=env,
                check=False,
            )
            if done.returncode != 0 and done.stderr:
                LOG.warning("http-backend: %s", done.stderr.decode("utf-8", "replace").strip())
            output.seek(0)
            status, headers = self._cgi_headers(output)
            start = output.tell()
            output.seek(0, os.SEEK_END)
            size = output.tell() - start
            output.seek(start)
            self.send_response(status)
            for key, value in headers:
                self.send_header(key, value)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            shutil.copyfileobj(output, self.wfile)
        if self.command == "POST" and path.endswith("/git-receive-pack") and status == 200:
            forge.pushed()

    @staticmethod
    def _cgi_headers(output: IO[bytes]) -> tuple[int, list[tuple[str, str]]]:
        status = 200
        headers: list[tuple[str, str]] = []
        while True:
            line = output.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            key, _, value = line.decode("latin-1").partition(":")
            if key.lower() == "status":
                status = int(value.strip().split(" ")[0])
            else:
                headers.append((key.strip(), value.strip()))
        return status, headers


class ForgeServer:
    """A smart-HTTP server for one embedded forge; use as a context manager or ``start()``.

    ``on_push`` (optional) is called after every accepted push, from a server thread.
    """

    def __init__(
        self,
        path: Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        on_push: Callable[[], None] | None = None,
    ) -> None:
        self.path = Path(path).expanduser().resolve()
        if not is_forge(self.path):
            raise BadInput(f"forge serve {path}: not an Assay forge (run `assay forge init` first)")
        self.name = self.path.name
        self.backend = find_http_backend()
        self.on_push = on_push
        self._server = _Server((host, port), self)
        self._thread: threading.Thread | None = None

    @property
    def host(self) -> str:
        return str(self._server.server_address[0])

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The URL clients pass to ``--forge``."""
        return f"http://{self.host}:{self.port}/{self.name}"

    def pushed(self) -> None:
        if self.on_push is not None:
            try:
                self.on_push()
            except Exception:  # a hook must never take the server down
                LOG.exception("on_push hook failed")

    def start(self) -> ForgeServer:
        """Serve from a background thread and return at once."""
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=f"forge-serve-{self.port}", daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve on the calling thread until ``stop()`` (or a signal) ends it."""
        self._server.serve_forever()

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._thread is not None:
            self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> ForgeServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
