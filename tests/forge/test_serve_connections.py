"""``assay forge serve`` drops silent and slow clients, with a fixed number of threads.

A server that gave every connection a thread of its own and no timeout held 2,001 threads
for 2,000 connections that sent nothing, and closed none of them a minute later. Here
hundreds of raw sockets connect and say nothing, or send half a request line, half their
headers, or half a body, while a real ``git clone`` and ``git push`` go through the same
server; every stalled socket is closed within the idle timeout (set short here), and the
server's threads stay at its pool's size.
"""

from __future__ import annotations

import os
import selectors
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.forge import ForgeServer, connections, smarthttp
from assay.plumbing import ASSAY_IDENTITY
from tests.conftest import assay_argv, assay_env
from tests.forge_fixtures import put_on_main, wait_until

IDLE = 1.0
WORKERS = 4
SILENT = 250


def git(*args: str, cwd: Path | None = None) -> str:
    env = {**os.environ, **ASSAY_IDENTITY.env(), "GIT_TERMINAL_PROMPT": "0"}
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr[-800:]}"
    return done.stdout


def connect(server: ForgeServer, sends: bytes = b"") -> socket.socket:
    sock = socket.create_connection((server.host, server.port), timeout=10)
    if sends:
        sock.sendall(sends)
    return sock


def wait_closed(socks: list[socket.socket], *, within: float, since: float | None = None) -> None:
    """Wait until the server has closed every one of ``socks`` (each reads end of file or a
    reset); fail the test if some are open ``within`` seconds after ``since`` (now)."""
    deadline = (time.monotonic() if since is None else since) + within
    selector = selectors.DefaultSelector()
    for sock in socks:
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
    open_ = set(socks)
    try:
        while open_:
            events = selector.select(max(0.0, deadline - time.monotonic()))
            if not events and time.monotonic() >= deadline:
                pytest.fail(f"{len(open_)} of {len(socks)} stalled connections still open")
            for key, _ in events:
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                try:
                    data = sock.recv(1 << 16)
                except ConnectionResetError:
                    data = b""
                if not data:
                    selector.unregister(sock)
                    open_.discard(sock)
    finally:
        selector.close()


@pytest.fixture
def stalled() -> Iterator[list[socket.socket]]:
    socks: list[socket.socket] = []
    yield socks
    for sock in socks:
        sock.close()


def test_silent_and_slow_clients_are_dropped_while_git_is_served(
    forge_path: Path, tmp_path: Path, stalled: list[socket.socket]
) -> None:
    before = threading.active_count()
    with ForgeServer(forge_path, max_connections=WORKERS, idle_timeout=IDLE) as server:
        name = server.name
        silent = [connect(server) for _ in range(SILENT)]
        connected = time.monotonic()
        stalled += silent
        slow = [
            f"GET /{name}/info/refs?serv".encode(),  # half a request line
            f"GET /{name}/info/refs?service=git-upload-pack HTTP/1.0\r\nHost: x\r\n".encode(),
            (
                f"POST /{name}/git-upload-pack HTTP/1.0\r\n"
                "Content-Type: application/x-git-upload-pack-request\r\n"
                "Content-Length: 400\r\n\r\n0014command=ls-refs\n"
            ).encode(),  # half a body
        ]
        slow_socks = [connect(server, slow[n % len(slow)]) for n in range(3 * WORKERS)]
        stalled += slow_socks
        # The server's threads: its pool and its accepting thread, whatever connects.
        assert threading.active_count() <= before + WORKERS + 2

        clone = tmp_path / "clone"
        git("clone", "--quiet", server.url, str(clone))
        (clone / "briefs" / "b1.md").write_text("a brief\n")
        git("add", ".", cwd=clone)
        git("commit", "--quiet", "-m", "a brief", cwd=clone)
        git("push", "--quiet", "origin", "main", cwd=clone)
        pushed = git("rev-parse", "HEAD", cwd=clone).strip()
        assert git("--git-dir", str(forge_path), "rev-parse", "main").strip() == pushed

        # A silent one goes IDLE s after it connected (a little more on a busy machine); a
        # slow one holds a worker for IDLE s at most, WORKERS at a time.
        wait_closed(silent, within=IDLE + 3, since=connected)
        wait_closed(slow_socks, within=IDLE * 3 + 5, since=connected)
        assert server.started["dropped"] >= SILENT
        assert threading.active_count() <= before + WORKERS + 2

        # And the server still serves.
        git("ls-remote", server.url)
    assert threading.active_count() <= before + 1  # the workers ended with the server


def test_a_client_that_stops_reading_its_answer_is_dropped(
    forge_path: Path, stalled: list[socket.socket]
) -> None:
    """A fetch whose client reads nothing of a pack larger than the sockets' buffers: the
    server's write times out and its one worker serves the next client."""
    put_on_main(forge_path, {"big.bin": os.urandom(12 << 20)})
    tip = git("--git-dir", str(forge_path), "rev-parse", "main").strip()
    body = b"".join(smarthttp.pkt_line(line) for line in (b"command=fetch\n", b"agent=t\n"))
    body += smarthttp.DELIM + smarthttp.pkt_line(f"want {tip}\n".encode())
    body += smarthttp.pkt_line(b"done\n") + smarthttp.FLUSH
    with ForgeServer(forge_path, max_connections=1, idle_timeout=IDLE) as server:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((server.host, server.port))
        stalled.append(sock)
        head = (
            f"POST /{server.name}/git-upload-pack HTTP/1.0\r\n"
            "Content-Type: application/x-git-upload-pack-request\r\n"
            f"Git-Protocol: version=2\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        sock.sendall(head.encode() + body)
        # Nothing read yet: this needs the one worker, so it is served only once the
        # server has given up on the stalled reader.
        git("ls-remote", server.url)
        assert server.started["fetched"] == 1  # the big answer was being written
        wait_closed([sock], within=IDLE + 10)


def test_the_cli_takes_the_pool_size_and_the_idle_timeout(
    forge_path: Path, stalled: list[socket.socket]
) -> None:
    args = ["forge", "serve", str(forge_path), "--port", "0", "--max-connections", "2"]
    proc = subprocess.Popen(
        assay_argv(*args, "--idle-timeout", "0.5"),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=assay_env(),
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        host, port = url.removeprefix("http://").split("/")[0].split(":")
        stalled.append(socket.create_connection((host, int(port)), timeout=10))
        wait_closed(stalled, within=5)
        git("ls-remote", url)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.mark.parametrize(
    "option", [["--max-connections", "0"], ["--idle-timeout", "0"], ["--idle-timeout", "-1"]]
)
def test_the_cli_refuses_a_pool_of_nothing_and_no_timeout(
    forge_path: Path, option: list[str]
) -> None:
    done = subprocess.run(
        assay_argv("forge", "serve", str(forge_path), "--port", "0", *option),
        capture_output=True,
        text=True,
        env=assay_env(),
        timeout=60,
    )
    assert done.returncode == 2 and option[0] in done.stderr


def test_past_max_waiting_the_oldest_silent_connection_goes_first(
    stalled: list[socket.socket],
) -> None:
    """The pool alone, on a real listening socket: with room for two silent connections, a
    third closes the first at once; the others wait for their bytes and are served."""
    served: list[bytes] = []
    listener = socket.create_server(("127.0.0.1", 0))

    def handle(sock: socket.socket, address: object) -> None:
        served.append(sock.recv(64))
        sock.sendall(b"ok")

    pool = connections.Pool(listener, handle, workers=1, idle_timeout=30, max_waiting=2)
    loop = threading.Thread(target=pool.serve_forever, daemon=True)
    loop.start()
    port = listener.getsockname()[1]
    try:
        stalled += [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
        wait_until(lambda: pool.waiting() == 2, timeout=10, what="two waiting connections")
        stalled.append(socket.create_connection(("127.0.0.1", port)))
        first, second, third = stalled
        wait_closed([first], within=10)
        for sock, said in ((second, b"two"), (third, b"three")):
            sock.setblocking(True)
            sock.sendall(said)
            sock.settimeout(10)
            assert sock.recv(2) == b"ok"
        assert sorted(served) == [b"three", b"two"]
    finally:
        pool.shutdown()
        pool.close()
        listener.close()
        loop.join(10)


@pytest.mark.parametrize("gone", [BrokenPipeError, ConnectionResetError, TimeoutError])
def test_a_client_gone_mid_answer_is_a_drop_not_a_failure(
    caplog: pytest.LogCaptureFixture, gone: type[OSError]
) -> None:
    """A handler that meets a closed or silent client (a desk SIGKILLed mid-transfer) ends
    that connection as a drop: counted, no traceback logged, and the worker serves on."""
    drops: list[int] = []
    served = threading.Event()

    def handle(sock: socket.socket, address: object) -> None:
        if sock.recv(16) == b"first":
            raise gone(32, "the client went away")
        served.set()

    listener = socket.create_server(("127.0.0.1", 0))
    pool = connections.Pool(listener, handle, workers=1, on_drop=lambda: drops.append(1))
    thread = threading.Thread(target=pool.serve_forever)
    thread.start()
    try:
        for message in (b"first", b"second"):
            with socket.create_connection(listener.getsockname()) as client:
                client.sendall(message)
            if message == b"first":
                wait_until(lambda: drops, what="the drop counted")
        assert served.wait(20), "the one worker did not serve the next client"
    finally:
        pool.shutdown()
        thread.join(20)
        pool.close()
        listener.close()
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []
