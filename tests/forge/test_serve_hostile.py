"""Hostile requests to ``assay forge serve``: each gets a clean HTTP error, others keep going.

Malformed pkt-lines, garbage and oversized bodies, lying lengths, broken chunking and gzip,
path traversal, escaping ref-prefixes and services that are not served. After each, a real
``git ls-remote`` and a push through the same server still work.
"""

from __future__ import annotations

import gzip
import hashlib
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.forge import ForgeServer
from assay.forge.smarthttp import FLUSH, pkt_line
from tests.forge.serving import request as _request
from tests.forge_fixtures import put_on_main, wait_until

UPLOAD = {"Content-Type": "application/x-git-upload-pack-request", "Git-Protocol": "version=2"}
RECEIVE = {"Content-Type": "application/x-git-receive-pack-request"}
LS_REFS = pkt_line(b"command=ls-refs\n") + b"0001"


@pytest.fixture
def server(forge_path: Path) -> Iterator[ForgeServer]:
    with ForgeServer(forge_path) as served:
        yield served


def _still_serves(server: ForgeServer) -> None:
    listed = subprocess.run(
        ["git", "ls-remote", server.url], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "refs/heads/main" in listed
    put_on_main(server.url, {"briefs/after.md": "# after\n"})


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/forge.git/../other.git/info/refs?service=git-upload-pack", 404),
        ("/other.git/info/refs?service=git-upload-pack", 404),
        ("/forge.git/%2e%2e/other.git/info/refs?service=git-upload-pack", 404),
        ("/forge.git/info/refs/../../config?service=git-upload-pack", 404),
        ("/forge.git/config", 404),
        ("/forge.git/objects/info/packs", 404),  # the dumb protocol is not served
        ("/forge.git/HEAD", 404),
        ("/forge.git/info/refs", 403),  # no service: a dumb client
        ("/forge.git/info/refs?service=git-upload-archive", 403),
        ("/forge.git/info/refs?service=../../bin/sh", 403),
        ("//etc/passwd", 404),
    ],
)
def test_paths_and_services_outside_the_two_are_refused(
    server: ForgeServer, path: str, status: int
) -> None:
    assert _request(server, "GET", path)[0] == status
    _still_serves(server)


@pytest.mark.parametrize(
    ("body", "headers", "status"),
    [
        (LS_REFS + b"zzzz", UPLOAD, 400),  # not a hex length
        (LS_REFS + b"+0a1", UPLOAD, 400),  # int() would take this one
        (LS_REFS + b"00ffpeel\n" + FLUSH, UPLOAD, 400),  # runs past the body's end
        (LS_REFS + b"0003" + FLUSH, UPLOAD, 400),  # a length git never writes
        (LS_REFS + pkt_line(b"peel\n"), UPLOAD, 400),  # no flush
        (LS_REFS + FLUSH + pkt_line(b"more\n"), UPLOAD, 400),  # after the flush
        (LS_REFS + pkt_line(b"rm -rf /\n") + FLUSH, UPLOAD, 400),  # unknown argument
        (LS_REFS + pkt_line(b"\xff\xfe\n") + FLUSH, UPLOAD, 400),  # not UTF-8
        (LS_REFS + b"0002" + FLUSH, UPLOAD, 400),  # a response-end in a request
        (
            pkt_line(b"command=ls-refs\n") + pkt_line(b"object-format=sha256\n") + FLUSH,
            UPLOAD,
            400,
        ),
        (pkt_line(b"command=ls-refs\n") + pkt_line(b"evil=1\n") + FLUSH, UPLOAD, 400),
        (pkt_line(b"command=ls-refs\n") * 2 + FLUSH, UPLOAD, 400),
        (pkt_line(b"command=rm-rf\n") + FLUSH, UPLOAD, 400),  # upload-pack refuses it
        (b"garbage garbage", UPLOAD, 400),
        (b"garbage garbage", RECEIVE, 400),
        (b"", RECEIVE, 400),
        (
            LS_REFS + pkt_line(b"ref-prefix refs/heads/\n") * 60000 + FLUSH,
            UPLOAD,
            413,
        ),
        (b"not gzip at all", {**UPLOAD, "Content-Encoding": "gzip"}, 400),
        (
            gzip.compress(b"\0" * (1 << 16), mtime=0)[:-9],
            {**UPLOAD, "Content-Encoding": "gzip"},
            400,
        ),
        (LS_REFS + FLUSH, {**UPLOAD, "Content-Encoding": "br"}, 415),
        (LS_REFS + FLUSH, {**UPLOAD, "Content-Type": "text/plain"}, 415),
        (LS_REFS + FLUSH, {**UPLOAD, "Content-Length": "twelve"}, 400),
    ],
)
def test_bad_bodies_get_a_clean_error(
    server: ForgeServer, body: bytes, headers: dict[str, str], status: int
) -> None:
    path = "/forge.git/git-receive-pack" if headers is RECEIVE else "/forge.git/git-upload-pack"
    assert _request(server, "POST", path, body, **headers)[0] == status
    _still_serves(server)


def test_a_gzip_ls_refs_is_answered(server: ForgeServer) -> None:
    body = gzip.compress(LS_REFS + pkt_line(b"ref-prefix refs/heads/main\n") + FLUSH)
    status, answer = _request(
        server, "POST", "/forge.git/git-upload-pack", body, **UPLOAD, **{"Content-Encoding": "gzip"}
    )
    assert status == 200 and answer.endswith(b" refs/heads/main\n0000")


def test_posts_to_other_paths_are_refused(server: ForgeServer) -> None:
    for path in (
        "/forge.git/git-upload-archive",
        "/forge.git/info/refs",
        "/other.git/git-upload-pack",
    ):
        assert _request(server, "POST", path, LS_REFS + FLUSH, **UPLOAD)[0] == 404
    _still_serves(server)


def _raw(server: ForgeServer, data: bytes) -> bytes:
    with socket.create_connection((server.host, server.port), timeout=30) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


@pytest.mark.parametrize(
    "framing",
    [
        b"Content-Length: 500\r\n\r\n" + LS_REFS,  # the body ends early
        b"Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",  # not a hex size
        b"Transfer-Encoding: chunked\r\n\r\n-5\r\nabc\r\n0\r\n\r\n",
        b"Transfer-Encoding: chunked\r\n\r\nfff\r\nabc",  # ends inside a chunk
    ],
)
def test_lying_framing_gets_a_400(server: ForgeServer, framing: bytes) -> None:
    head = b"POST /forge.git/git-upload-pack HTTP/1.1\r\nHost: x\r\n"
    head += b"Content-Type: application/x-git-upload-pack-request\r\nGit-Protocol: version=2\r\n"
    assert _raw(server, head + framing).startswith(b"HTTP/1.0 400")
    _still_serves(server)


def test_a_stalled_client_does_not_hold_up_the_others(server: ForgeServer) -> None:
    with socket.create_connection((server.host, server.port), timeout=30) as stalled:
        stalled.sendall(
            b"POST /forge.git/git-upload-pack HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n"
            b"Content-Type: application/x-git-upload-pack-request\r\n\r\n" + LS_REFS
        )
        _still_serves(server)


def test_a_push_whose_client_hangs_up_unheard_still_lands(forge_path: Path) -> None:
    tip = subprocess.run(
        ["git", "rev-parse", "main"], cwd=forge_path, capture_output=True, text=True, check=True
    ).stdout.strip()
    command = f"{'0' * 40} {tip} refs/heads/hung-up\0report-status\n".encode()
    empty_pack = b"PACK\0\0\0\2\0\0\0\0"
    body = pkt_line(command) + FLUSH + empty_pack + hashlib.sha1(empty_pack).digest()
    pushes: list[int] = []
    with ForgeServer(forge_path, on_push=lambda: pushes.append(1)) as served:
        with socket.create_connection((served.host, served.port), timeout=30) as sock:
            sock.sendall(
                b"POST /forge.git/git-receive-pack HTTP/1.1\r\nHost: x\r\n"
                b"Content-Type: application/x-git-receive-pack-request\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            # and closes at once, before a byte of the answer (which then finds no one)
        wait_until(lambda: pushes == [1], timeout=30, what="the push's on_push")
        _still_serves(served)
    listed = subprocess.run(
        ["git", "rev-parse", "refs/heads/hung-up"],
        cwd=forge_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert listed.stdout.strip() == tip
