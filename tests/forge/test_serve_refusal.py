"""A push that can only lose its compare-and-swap is refused by the server itself.

Each refusal the server writes without starting ``receive-pack`` is compared byte for byte
with what git 2.39's ``receive-pack --stateless-rpc`` writes for the same body on the same
forge (every report and side-band framing, atomic and not). A real ``git push`` that
hears the refusal classifies it as a lost race, as it does git's own. Hostile and unusual
bodies (lying lengths, no flush, no pack, huge command lists, deletes, hidden refs, a
pre-receive hook) are left to ``receive-pack``, and the answer is then git's.
"""

from __future__ import annotations

import http.client
import subprocess
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from assay.forge import Forge, ForgeServer
from assay.forge.smarthttp import FLUSH, pkt_line, service_env
from assay.plumbing import ASSAY_IDENTITY, ZERO_SHA, PushOutcome, RefUpdate
from tests.forge.serving import request
from tests.forge_fixtures import put_on_main

RECEIVE = {"Content-Type": "application/x-git-receive-pack-request"}
AGENT = "agent=git/2.39.5 object-format=sha1"


def _git(forge: Path, *args: str, input: bytes | None = None) -> bytes:
    return subprocess.run(
        ["git", f"--git-dir={forge}", *args],
        input=input,
        env={**service_env(remote_addr="", git_protocol=""), **ASSAY_IDENTITY.env()},
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout


class Shas:
    """Commits on the forge: ``a`` (a root), ``b`` and ``c`` (two children of ``a``)."""

    def __init__(self, forge: Path) -> None:
        tree = _git(forge, "mktree", input=b"").decode().strip()
        self.a = _git(forge, "commit-tree", tree, "-m", "a").decode().strip()
        self.b = _git(forge, "commit-tree", tree, "-p", self.a, "-m", "b").decode().strip()
        self.c = _git(forge, "commit-tree", tree, "-p", self.a, "-m", "c").decode().strip()
        self.pack = _git(
            forge,
            "pack-objects",
            "--revs",
            "--stdout",
            "-q",
            input=f"{self.c}\n^{self.a}\n".encode(),
        )


@pytest.fixture
def shas(forge_path: Path) -> Shas:
    made = Shas(forge_path)
    for ref in ("refs/heads/x", "refs/heads/y", "refs/assay/claims/q"):
        _git(forge_path, "update-ref", ref, made.b)
    return made


@pytest.fixture
def server(forge_path: Path, shas: Shas) -> Iterator[ForgeServer]:
    with ForgeServer(forge_path) as served:
        yield served


def _body(commands: list[tuple[str, str, str]], caps: str, pack: bytes) -> bytes:
    lines = []
    for index, (old, new, ref) in enumerate(commands):
        line = f"{old} {new} {ref}".encode()
        lines.append(pkt_line(line + (b"\0" + caps.encode() if index == 0 else b"") + b"\n"))
    return b"".join(lines) + FLUSH + pack


def _post(server: ForgeServer, body: bytes, **headers: str) -> tuple[int, bytes]:
    return request(server, "POST", f"/{server.name}/git-receive-pack", body, **RECEIVE, **headers)


def _receive_pack(forge: Path, body: bytes) -> bytes:
    env = service_env(remote_addr="127.0.0.1", git_protocol="")
    return subprocess.run(
        ["git", "receive-pack", "--stateless-rpc", "."],
        cwd=forge,
        input=body,
        env=env,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout


def _refs(forge: Path) -> str:
    return _git(forge, "for-each-ref").decode()


CAPS = [
    "report-status",
    "report-status-v2 side-band-64k quiet",
    "report-status side-band-64k",
    "side-band-64k quiet",
    "ofs-delta",
    "report-status atomic",
    "report-status-v2 side-band-64k atomic ofs-delta",
    "side-band-64k atomic",
]


def _stale_pushes(s: Shas) -> list[list[tuple[str, str, str]]]:
    return [
        [(s.a, s.c, "refs/heads/x")],  # x moved a -> b under us
        [(ZERO_SHA, s.c, "refs/assay/claims/q")],  # a claim someone created first
        [(s.a, s.c, "refs/heads/x"), (ZERO_SHA, s.c, "refs/heads/y")],  # every one stale
    ]


@pytest.mark.parametrize("caps", CAPS)
@pytest.mark.parametrize("which", range(3))
def test_a_stale_push_is_refused_as_receive_pack_refuses_it(
    server: ForgeServer, forge_path: Path, shas: Shas, caps: str, which: int
) -> None:
    body = _body(_stale_pushes(shas)[which], f"{caps} {AGENT}", shas.pack)
    before = _refs(forge_path)
    status, answer = _post(server, body)
    assert status == 200
    assert server.started["receive-pack"] == 0 and server.started["refused"] == 1
    assert _refs(forge_path) == before
    assert answer == _receive_pack(forge_path, body)
    assert _refs(forge_path) == before


@pytest.mark.parametrize("caps", ["report-status atomic", "report-status-v2 side-band-64k atomic"])
def test_an_atomic_push_with_one_stale_command_is_refused_whole(
    server: ForgeServer, forge_path: Path, shas: Shas, caps: str
) -> None:
    commands = [(shas.b, shas.c, "refs/heads/x"), (shas.a, shas.c, "refs/heads/y")]
    body = _body(commands, f"{caps} {AGENT}", shas.pack)
    status, answer = _post(server, body)
    assert status == 200 and server.started["receive-pack"] == 0
    assert b"atomic transaction failed" in answer
    assert answer == _receive_pack(forge_path, body)
    assert _git(forge_path, "rev-parse", "refs/heads/x").decode().strip() == shas.b


def test_a_non_atomic_push_with_one_good_command_goes_to_receive_pack(
    server: ForgeServer, forge_path: Path, shas: Shas
) -> None:
    commands = [(shas.b, shas.c, "refs/heads/x"), (shas.a, shas.c, "refs/heads/y")]
    status, answer = _post(server, _body(commands, f"report-status {AGENT}", shas.pack))
    assert status == 200 and server.started["receive-pack"] == 1
    assert b"ok refs/heads/x\n" in answer and b"ng refs/heads/y failed to update ref" in answer
    assert _git(forge_path, "rev-parse", "refs/heads/x").decode().strip() == shas.c


# ----------------------------------------------------------------- what a real client hears


class _StaleAdvertiser(ThreadingHTTPServer):
    """A loopback proxy that answers ``info/refs`` with an advertisement recorded earlier
    and passes every POST to the forge server: a client that read the refs just before
    another writer moved them."""

    daemon_threads = True

    def __init__(self, upstream: ForgeServer, advertisement: bytes) -> None:
        self.upstream = upstream
        self.advertisement = advertisement
        super().__init__(("127.0.0.1", 0), _Proxy)


class _Proxy(BaseHTTPRequestHandler):
    server: _StaleAdvertiser

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._reply(200, "application/x-git-receive-pack-advertisement", self.server.advertisement)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        conn = http.client.HTTPConnection(self.server.upstream.host, self.server.upstream.port)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
            conn.request("POST", self.path, body=body, headers=headers)
            reply = conn.getresponse()
            self._reply(reply.status, reply.getheader("Content-Type", ""), reply.read())
        finally:
            conn.close()

    def _reply(self, status: int, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _push_after_a_stale_read(
    server: ForgeServer, forge: Path, tmp_path: Path
) -> tuple[PushOutcome, Counter[str]]:
    """A claim acquire that read ``refs/assay/claims/race`` absent, then lost it; what the
    loser's push started on the server."""
    status, advertisement = request(
        server, "GET", f"/{server.name}/info/refs?service=git-receive-pack"
    )
    assert status == 200
    put_on_main(server.url, {"briefs/race.md": "# race\n"})
    winner = _git(forge, "rev-parse", "refs/heads/main").decode().strip()
    _git(forge, "update-ref", "refs/assay/claims/race", winner)
    before = Counter(server.started)
    proxy = _StaleAdvertiser(server, advertisement)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{proxy.server_address[1]}/{server.name}"
        with Forge(url, cache_dir=tmp_path / "loser-cache") as loser:
            mine = loser.commit(
                {"claim.json": b"{}\n"}, parents=[], message="claim", author=ASSAY_IDENTITY
            )
            result = loser.push([RefUpdate("refs/assay/claims/race", mine, expected=None)])
    finally:
        proxy.shutdown()
        proxy.server_close()
    assert result.lost, result
    return result.outcome, Counter(server.started) - before


def test_a_real_push_hears_the_refusal_as_a_lost_race(
    server: ForgeServer, forge_path: Path, tmp_path: Path
) -> None:
    outcome, started = _push_after_a_stale_read(server, forge_path, tmp_path)
    assert started == Counter({"refused": 1})
    # The same race answered by receive-pack itself (a pre-receive hook keeps it there).
    hook = forge_path / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\nexit 0\n")
    hook.chmod(0o755)
    _git(forge_path, "update-ref", "-d", "refs/assay/claims/race")
    again, started = _push_after_a_stale_read(server, forge_path, tmp_path / "again")
    assert started == Counter({"receive-pack": 1})
    assert again == outcome


# ------------------------------------------------------------- left to receive-pack, as git


def _left_to_git(server: ForgeServer, forge: Path, body: bytes) -> None:
    before = server.started["receive-pack"]
    status, answer = _post(server, body)
    assert server.started["refused"] == 0 and server.started["receive-pack"] == before + 1
    if status == 200:  # receive-pack answered; a request it refused outright is a 400
        assert answer == _receive_pack(forge, body)
    put_on_main(server.url, {"briefs/after.md": "# after\n"})  # the server still serves


def test_lying_lengths_and_missing_flushes_are_left_to_git(
    server: ForgeServer, forge_path: Path, shas: Shas
) -> None:
    good = _body([(shas.a, shas.c, "refs/heads/x")], f"report-status {AGENT}", b"")
    for body in (
        good.replace(b"0000", b""),  # no flush
        b"00ff" + good[4:],  # a length running past the body
        b"0003" + good,  # a length git never writes
        good,  # a flush but no pack after it
        good + b"PACK",  # a pack header cut short
    ):
        _left_to_git(server, forge_path, body)


def test_a_huge_command_list_is_left_to_git(
    server: ForgeServer, forge_path: Path, shas: Shas
) -> None:
    commands = [(shas.a, shas.c, f"refs/heads/many/{n}") for n in range(1500)]
    _left_to_git(server, forge_path, _body(commands, f"report-status {AGENT}", shas.pack))


def test_a_push_of_only_deletes_is_left_to_git(
    server: ForgeServer, forge_path: Path, shas: Shas
) -> None:
    commands = [(shas.a, ZERO_SHA, "refs/heads/x"), (shas.c, ZERO_SHA, "refs/heads/y")]
    _left_to_git(server, forge_path, _body(commands, f"report-status {AGENT}", b""))


@pytest.mark.parametrize(
    "ref", ["refs/heads/x/../y", "refs/heads/.x", "refs/heads/x.lock", "HEAD", "refs/heads/a b"]
)
def test_funny_ref_names_are_left_to_git(
    server: ForgeServer, forge_path: Path, shas: Shas, ref: str
) -> None:
    _left_to_git(
        server, forge_path, _body([(shas.a, shas.c, ref)], f"report-status {AGENT}", shas.pack)
    )


@pytest.mark.parametrize(
    "caps",
    ["report-status push-options", "report-status side-band", "report-status object-format=sha256"],
)
def test_capabilities_not_answered_here_are_left_to_git(
    server: ForgeServer, forge_path: Path, shas: Shas, caps: str
) -> None:
    body = _body([(shas.a, shas.c, "refs/heads/x")], f"{caps} agent=git/2.39.5", shas.pack)
    before = server.started["receive-pack"]
    _post(server, body)
    assert server.started["refused"] == 0 and server.started["receive-pack"] == before + 1


def test_hidden_refs_and_fast_forward_rules_are_left_to_git(
    server: ForgeServer, forge_path: Path, shas: Shas
) -> None:
    body = _body([(shas.a, shas.c, "refs/heads/x")], f"report-status {AGENT}", shas.pack)
    _git(forge_path, "config", "receive.hideRefs", "refs/heads/x")
    _left_to_git(server, forge_path, body)
    _git(forge_path, "config", "--unset", "receive.hideRefs")
    _git(forge_path, "config", "receive.denyNonFastForwards", "true")
    _left_to_git(server, forge_path, body)


def test_a_long_refusal_is_split_across_side_band_packets_as_git_splits_it(
    server: ForgeServer, forge_path: Path, shas: Shas
) -> None:
    refs = [f"refs/assay/claims/{'long-brief-name-' * 3}{n:04d}" for n in range(1000)]
    script = "".join(f"create {ref} {shas.b}\n" for ref in refs)
    _git(forge_path, "update-ref", "--stdin", input=script.encode())
    commands = [(ZERO_SHA, shas.c, ref) for ref in refs]  # every one already claimed
    body = _body(commands, f"report-status side-band-64k {AGENT}", shas.pack)
    status, answer = _post(server, body)
    assert status == 200 and server.started == {"refused": 1}
    assert len(answer) > 2 * 65520  # the report alone takes more than one packet
    assert answer == _receive_pack(forge_path, body)
