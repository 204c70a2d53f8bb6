"""The forge server's connections: a fixed pool of workers, and no thread for a silent client.

``http.server.ThreadingHTTPServer`` starts a thread for every connection and never times one
out: 2,000 connections that sent nothing held 2,001 threads, and none was closed a minute
later. :class:`Pool` instead waits for each new connection's first bytes on the accepting
thread (one selector for all of them); a connection that sends nothing within
``idle_timeout`` seconds of being accepted is closed there, and at most ``max_waiting`` wait
at once (the oldest is closed to make room). A connection with bytes to read is handed to
one of ``workers`` threads, in the order they became ready; the handler it runs sets its
own timeouts on the socket (:mod:`assay.forge.serve`: ``idle_timeout`` on every read and
write, and on the request line and headers in all). So the threads are ``workers`` plus
the accepting one, however many clients connect, and a client that stalls costs one worker
for at most the timeout.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

LOG = logging.getLogger("assay.forge.serve")

MAX_CONNECTIONS = 32  # requests served at once (worker threads)
IDLE_TIMEOUT_S = 30.0  # seconds a client may be silent, and may take over its headers
MAX_WAITING = 1024  # accepted connections that have not yet sent a byte
_ACCEPT_BATCH = 64  # connections taken from the listen queue per wake-up
_FULL_BACKOFF_S = 0.05  # out of file descriptors with nothing to close: accept again after

Handle = Callable[[socket.socket, Any], None]


class Pool:
    """Accept on ``listener`` and run ``handle(sock, address)`` on a worker thread for each
    connection that sends something; ``on_drop()`` is called for each one closed unheard.
    ``serve_forever()`` runs the accepting loop on the calling thread until ``shutdown()``
    (from another thread) or an exception (a signal's ``KeyboardInterrupt``); ``close()``
    ends the workers and closes what still waits."""

    def __init__(
        self,
        listener: socket.socket,
        handle: Handle,
        *,
        workers: int = MAX_CONNECTIONS,
        idle_timeout: float = IDLE_TIMEOUT_S,
        max_waiting: int = MAX_WAITING,
        on_drop: Callable[[], None] = lambda: None,
    ) -> None:
        self.listener = listener
        self.handle = handle
        self.workers = workers
        self.idle_timeout = idle_timeout
        self.max_waiting = max_waiting
        self.on_drop = on_drop
        self._ready: queue.SimpleQueue[tuple[socket.socket, Any] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._waiting: dict[socket.socket, tuple[float, Any]] = {}  # oldest first
        self._wake_r, self._wake_w = os.pipe()
        self._stopping = False
        self._stopped = threading.Event()
        self._stopped.set()
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ the accepting loop

    def serve_forever(self) -> None:
        self._start_workers()
        self._stopped.clear()
        self.listener.setblocking(False)
        selector = selectors.DefaultSelector()
        selector.register(self.listener, selectors.EVENT_READ)
        selector.register(self._wake_r, selectors.EVENT_READ)
        try:
            while not self._stopping:
                for key, _ in selector.select(self._next_expiry()):
                    if key.fileobj is self.listener:
                        self._accept(selector)
                    elif key.fileobj == self._wake_r:
                        os.read(self._wake_r, 512)
                    else:
                        self._hand_over(selector, key.fileobj)  # type: ignore[arg-type]
                self._expire(selector, time.monotonic())
        finally:
            for sock in list(self._waiting):
                selector.unregister(sock)
                self._waiting.pop(sock)
                _close(sock)
            selector.close()
            self._stopped.set()

    def _next_expiry(self) -> float | None:
        for deadline, _ in self._waiting.values():  # the first is the oldest
            return max(0.0, deadline - time.monotonic())
        return None

    def _accept(self, selector: selectors.BaseSelector) -> None:
        """Accept what the listen queue holds (up to a batch)."""
        for _ in range(_ACCEPT_BATCH):
            try:
                sock, address = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return  # the queue is empty, or the client gave up first
            except OSError as exc:  # out of file descriptors: the oldest silent client goes
                LOG.warning("forge serve: cannot accept a connection: %s", exc)
                if not self._drop_oldest(selector):
                    # Nothing of ours to close: the workers hold every descriptor.
                    selector.select(_FULL_BACKOFF_S)
                return
            if len(self._waiting) >= self.max_waiting:
                self._drop_oldest(selector)
            self._waiting[sock] = (time.monotonic() + self.idle_timeout, address)
            selector.register(sock, selectors.EVENT_READ)

    def _hand_over(self, selector: selectors.BaseSelector, sock: socket.socket) -> None:
        if sock not in self._waiting:
            return  # dropped earlier in the same wake-up to make room
        selector.unregister(sock)
        _, address = self._waiting.pop(sock)
        sock.setblocking(True)
        self._ready.put((sock, address))

    def _expire(self, selector: selectors.BaseSelector, now: float) -> None:
        while self._waiting:
            sock, (deadline, _) = next(iter(self._waiting.items()))
            if deadline > now:
                return
            self._drop(selector, sock)

    def _drop_oldest(self, selector: selectors.BaseSelector) -> bool:
        if not self._waiting:
            return False
        self._drop(selector, next(iter(self._waiting)))
        return True

    def _drop(self, selector: selectors.BaseSelector, sock: socket.socket) -> None:
        selector.unregister(sock)
        _, address = self._waiting.pop(sock)
        LOG.debug("closed %s: it sent nothing for %s s", address, self.idle_timeout)
        _close(sock)
        self.on_drop()

    # ------------------------------------------------------------------ the workers

    def _start_workers(self) -> None:
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            for number in range(len(self._threads), self.workers):
                thread = threading.Thread(target=self._work, name=f"forge-worker-{number}")
                thread.daemon = True
                thread.start()
                self._threads.append(thread)

    def _work(self) -> None:
        while True:
            item = self._ready.get()
            if item is None:
                return
            sock, address = item
            try:
                self.handle(sock, address)
            except (ConnectionError, TimeoutError):
                # The client went away (a desk killed mid-request) or went quiet past the
                # timeout: an ordinary end of a connection, counted, not a failure to log.
                self.on_drop()
            except Exception:  # one connection's failure must not take a worker down
                LOG.exception("forge serve: a connection from %s failed", address)
            finally:
                _close(sock)

    # ------------------------------------------------------------------ stopping

    def shutdown(self) -> None:
        """End ``serve_forever()`` (called from another thread) and wait until it has."""
        self._stopping = True
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            return  # closed already
        self._stopped.wait()

    def close(self, *, timeout: float = 10.0) -> None:
        """End the workers (a request under way finishes first, for up to ``timeout``)."""
        with self._lock:
            threads, self._threads = self._threads, []
        for _ in threads:
            self._ready.put(None)
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    def waiting(self) -> int:
        """Connections accepted that have not sent a byte yet."""
        return len(self._waiting)

    def threads(self) -> int:
        """Worker threads alive now."""
        with self._lock:
            return sum(1 for t in self._threads if t.is_alive())


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # the client is gone already
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
