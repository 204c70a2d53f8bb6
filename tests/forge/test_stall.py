"""A forge that accepts a connection and then says nothing: git gives up, Assay retries, 69."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from assay.errors import ForgeUnavailable
from assay.forge import Forge
from assay.plumbing import RetryPolicy


class Silent:
    """A TCP server on 127.0.0.1 that accepts, reads, and never answers."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accepted = 0
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            self.held.append(client)

    def close(self) -> None:
        """Stop accepting, wait for the accept loop to end, then close every connection."""
        self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self.thread.join(timeout=10)
        for client in self.held:
            client.close()


def test_a_silent_forge_is_given_up_on_and_reported_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASSAY_FORGE_STALL_SECONDS", "1")
    silent = Silent()
    try:
        policy = RetryPolicy(attempts=2, max_seconds=60, initial_wait=0.05, max_wait=0.1)
        with Forge(
            f"http://127.0.0.1:{silent.port}/forge.git", cache_dir=tmp_path, retry=policy
        ) as forge:
            began = time.monotonic()
            with pytest.raises(ForgeUnavailable) as caught:
                forge.ls_refs("refs/assay/")
            waited = time.monotonic() - began
    finally:
        silent.close()
    assert silent.accepted >= 2  # each attempt reached the forge and was retried
    assert "unreachable after retries" in caught.value.message
    # Each attempt stalls for about a second, far below the 120 s hard timeout of a git call.
    assert waited < 60
