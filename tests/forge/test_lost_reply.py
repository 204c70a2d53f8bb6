"""A push whose reply is lost after the server applied it: the retry must count it as ours.

A small TCP proxy sits between git and the smart-HTTP forge. For the next receive-pack
request it forwards the push to the server but swallows the server's answer and hangs up,
exactly what a connection dropped at the wrong instant looks like to git.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.claims import ClaimStore
from assay.forge import Forge
from assay.plumbing import Identity, PushOutcome, RefUpdate, RetryPolicy
from tests.forge_fixtures import Served

ME = Identity("coder", "h@coder.assay.invalid")
FAST = RetryPolicy(attempts=4, max_seconds=20, initial_wait=0.05, max_wait=0.2)


class ReplyDropper:
    """Forward 127.0.0.1:<port> to the forge; drop the reply of the next N pushes."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.drop_pushes = 0
        self.dropped = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
        except OSError:  # the forge refused us: so does the proxy (git sees a reset, retries)
            client.close()
            return
        first = client.recv(65536)
        drop = False
        if first.startswith(b"POST ") and b"/git-receive-pack " in first.split(b"\r\n", 1)[0]:
            with self._lock:
                if self.drop_pushes > 0:
                    self.drop_pushes -= 1
                    drop = True
        upstream.sendall(first)
        threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
        while chunk := upstream.recv(65536):
            if not drop:  # when dropping, the server did answer; the client never hears it
                client.sendall(chunk)
        if drop:
            self.dropped += 1
        # shutdown() (not just close()) ends the connection although the pump thread is
        # still blocked reading from it.
        for sock in (upstream, client):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass


@pytest.fixture
def dropper(http_forge: Served) -> Iterator[ReplyDropper]:
    port = int(http_forge.url.split(":")[2].split("/")[0])
    proxy = ReplyDropper(port)
    try:
        yield proxy
    finally:
        proxy.close()


def test_a_landed_push_whose_reply_was_lost_is_ours(
    dropper: ReplyDropper, http_forge: Served, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"http://127.0.0.1:{dropper.port}/{http_forge.path.name}"
    with Forge(url, cache_dir=tmp_path / "cache", retry=FAST) as forge:
        ref = "refs/assay/claims/b1"
        commit = forge.commit({"claim.json": b"{}"}, parents=[], message="m", author=ME)
        dropper.drop_pushes = 1
        with caplog.at_level(logging.WARNING, logger="assay.plumbing"):
            result = forge.push([RefUpdate(ref, commit, expected=None)])
        assert dropper.dropped == 1
        assert any("retrying" in r.getMessage() for r in caplog.records)
        assert result.ok and result.outcome is PushOutcome.UP_TO_DATE
        assert forge.ls_refs("refs/assay/") == {ref: commit}


def test_an_acquire_whose_reply_was_lost_still_holds_the_claim(
    dropper: ReplyDropper, http_forge: Served, tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{dropper.port}/{http_forge.path.name}"
    with Forge(url, cache_dir=tmp_path / "cache", retry=FAST) as forge:
        store = ClaimStore(forge)
        dropper.drop_pushes = 1
        claim = store.acquire("b1", "coder", lease_s=60)
        assert dropper.dropped == 1
        record = store.get("b1")
        assert record is not None and record.holder == claim.holder and record.sha == claim.sha
        store.renew(claim)  # and it can go on from there
