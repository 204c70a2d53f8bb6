"""A forge URL whose server does not speak git is 69 "not a git forge", reads and writes.

A loopback web server answering every request with 200 "hello" used to read as an empty
forge (``claim list``: no claims, exit 0), and writes ended in exit 70.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from tests.conftest import AssayRunner


class _Hello(http.server.BaseHTTPRequestHandler):
    def _answer(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"hello")

    do_GET = _answer
    do_POST = _answer
    do_PROPFIND = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def hello_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/forge.git"
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


@pytest.mark.parametrize(
    "command",
    [
        ["claim", "list"],
        ["status"],
        ["brief", "list"],
        ["claim", "acquire", "b1", "--desk", "coder"],
        ["approve", "b1"],
    ],
    ids=["claim-list", "status", "brief-list", "acquire", "approve"],
)
def test_a_server_that_does_not_speak_git_is_unavailable(
    run_assay: AssayRunner, hello_url: str, command: list[str]
) -> None:
    done = run_assay(*command, "--forge", hello_url, env={"ASSAY_FORGE_RETRIES": "0"})
    assert done.returncode == 69, done.stdout + done.stderr
    assert "not a git forge" in done.stderr
