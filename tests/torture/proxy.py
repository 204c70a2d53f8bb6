"""A loopback TCP proxy that resets connections on a seeded schedule.

Every accepted connection is forwarded to ``target``; with probability ``reset_rate`` (drawn
from a seeded ``random.Random``) it is cut after a random number of forwarded bytes with a
TCP RST (``SO_LINGER`` 0) on both sides, so the client sees "connection reset by peer" in
the middle of a fetch or a push, as it would across a flaky network.
"""

from __future__ import annotations

import contextlib
import random
import select
import socket
import struct
import threading
from typing import Any


def _reset(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


class ResettingProxy:
    """``with ResettingProxy(port, reset_rate=0.2, seed=1) as proxy: proxy.port``."""

    def __init__(self, target_port: int, *, reset_rate: float, seed: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self.reset_rate = reset_rate
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.connections = 0
        self.resets = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> ResettingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        self._thread.join(timeout=10)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self._listener], [], [], 0.2)
                if not ready:
                    continue
                client, _ = self._listener.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
                cut = self.rng.random() < self.reset_rate
                after = self.rng.randint(0, 4096) if cut else -1
            threading.Thread(target=self._pipe, args=(client, after), daemon=True).start()

    def _pipe(self, client: socket.socket, cut_after: int) -> None:
        try:
            upstream = socket.create_connection(self.target, timeout=10)
        except OSError:
            _reset(client)
            return
        moved, cut = 0, False
        sockets = [client, upstream]
        try:
            while not self._stop.is_set():
                ready, _, _ = select.select(sockets, [], [], 0.5)
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    other = upstream if sock is client else client
                    if cut_after >= 0 and moved + len(data) > cut_after:
                        with self.lock:
                            self.resets += 1
                        cut = True
                        return
                    other.sendall(data)
                    moved += len(data)
        except OSError:
            return
        finally:
            if cut:
                _reset(client)
                _reset(upstream)
            else:
                for sock in sockets:
                    with contextlib.suppress(OSError):
                        sock.close()
