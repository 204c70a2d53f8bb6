"""A request body over the gateway's bound is refused with 413 while it is read.

The gateway runs in a child process (``GATEWAY`` below) with a 1 MiB bound, so its peak
resident memory (``VmHWM``) shows whether it buffered what a client sent: a raw chunked
upload of 96 MiB with the right token gets 413 before the client has sent it all, and the
child's peak grows by far less than the upload. A ``Content-Length`` over the bound is
refused before any body byte is sent. A normal request is served afterwards. The MCP
server's ``/mcp`` sits behind the same bound.
"""

from __future__ import annotations

import json
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import assay_env

TOKEN = "gw-bound-token-5d1e"
LIMIT = 1024 * 1024
UPLOAD = 96 * 1024 * 1024
CHUNK = 256 * 1024

GATEWAY = f"""
import sys
from assay.gateway.mcp import build_mcp_app
from assay.gateway.server import Gateway
from assay.gateway.upstream import Reply

class NoTools:
    def list_tools(self):
        return []

    def call_tool(self, name, arguments):
        raise AssertionError("no tool is called")

mcp = build_mcp_app(NoTools(), token={TOKEN!r})
with Gateway(token={TOKEN!r}, max_body_bytes={LIMIT}, mcp_app=mcp) as gateway:
    print(gateway.port, flush=True)
    while True:
        call = gateway.calls.get()
        call.answer(Reply(200, "application/json", b'{{"served": true}}', False))
"""


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int]]:
    child = subprocess.Popen(
        [sys.executable, "-c", GATEWAY],
        cwd=tmp_path,
        env=assay_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        yield child, port
    finally:
        child.kill()
        child.wait(timeout=10)
        if child.stdout is not None:
            child.stdout.close()


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def served(port: int) -> httpx.Response:
    return httpx.post(
        f"http://127.0.0.1:{port}/v1/messages",
        headers={"x-api-key": TOKEN},
        json={"model": "m", "max_tokens": 1, "messages": []},
        timeout=20,
    )


def head(path: str, extra: str) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: {TOKEN}\r\n"
        f"Content-Type: application/json\r\n{extra}\r\n"
    ).encode()


def response(sock: socket.socket, deadline: float) -> tuple[str, bytes]:
    """The status line and body of the answer (the gateway closes after a 413)."""
    data = b""
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            piece = sock.recv(65536)
        except ConnectionResetError:
            break
        if not piece:
            break
        data += piece
    headers, _, body = data.partition(b"\r\n\r\n")
    return headers.split(b"\r\n", 1)[0].decode(), body


@pytest.mark.parametrize("path", ["/v1/messages", "/mcp"])
def test_a_chunked_body_over_the_bound_is_refused_while_it_is_read(
    gateway: tuple[subprocess.Popen[str], int], path: str
) -> None:
    child, port = gateway
    assert served(port).json() == {"served": True}
    before = peak_rss_kib(child.pid)
    chunk = f"{CHUNK:x}\r\n".encode() + b"x" * CHUNK + b"\r\n"
    sent = 0
    deadline = time.monotonic() + 60
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(head(path, f"Authorization: Bearer {TOKEN}\r\nTransfer-Encoding: chunked\r\n"))
        sock.setblocking(False)
        answered = False
        pending = memoryview(chunk)
        while sent < UPLOAD and time.monotonic() < deadline:
            readable, writable, _ = select.select([sock], [sock], [], 1.0)
            if readable:
                answered = True
                break
            if writable:
                try:
                    done = sock.send(pending)
                except (BrokenPipeError, ConnectionResetError):
                    answered = True
                    break
                sent += done
                pending = pending[done:] or memoryview(chunk)
        assert answered, f"no answer after {sent} bytes"
        sock.setblocking(True)
        line, _ = response(sock, deadline)
    assert line.startswith("HTTP/1.1 413"), line
    assert sent < UPLOAD // 2, sent  # refused near the bound, not after the whole upload
    grown_mib = (peak_rss_kib(child.pid) - before) / 1024
    assert grown_mib < 16, f"the gateway's peak memory grew by {grown_mib:.0f} MiB"
    assert served(port).json() == {"served": True}  # and it still serves


def test_a_declared_length_over_the_bound_is_refused_before_the_body(
    gateway: tuple[subprocess.Popen[str], int],
) -> None:
    _, port = gateway
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(head("/v1/chat/completions", f"Content-Length: {UPLOAD}\r\n"))
        line, data = response(sock, time.monotonic() + 20)  # no body byte was sent
    assert line.startswith("HTTP/1.1 413"), line
    body = json.loads(data)
    assert body["error"]["type"] == "request_too_large" and str(LIMIT) in body["error"]["message"]
    small = b'{"model": "m", "messages": []}'
    at_limit = httpx.post(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        headers={"authorization": f"Bearer {TOKEN}", "content-type": "application/json"},
        content=small + b" " * (LIMIT - len(small)),
        timeout=20,
    )
    assert at_limit.status_code == 200 and at_limit.json() == {"served": True}
