"""The gateway relay: the first process of a ``network: gateway`` sandbox.

Run inside the sandbox as ``python -I -S relay.py PORT SOCKET -- ARGV...`` (standard library
only: Assay itself is not importable there). It listens on ``127.0.0.1:PORT`` of the
sandbox's own network namespace, forwards every connection to the Unix socket the
supervisor bind-mounted at ``SOCKET``, starts ``ARGV`` as its child and exits with the
child's code, which ends the PID namespace and everything else in it.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading

_CHUNK = 1 << 16


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while True:
            data = source.recv(_CHUNK)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def _serve(client: socket.socket, socket_path: str) -> None:
    # What comes back arrives in pieces (headers, then the body or each streamed event) and
    # is sent on as it comes: with Nagle's algorithm on, each piece after the first waited
    # for the client's delayed ACK of the one before (up to 40 ms a piece).
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(socket_path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _accept(listener: socket.socket, socket_path: str) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_serve, args=(client, socket_path), daemon=True).start()


def main(argv: list[str]) -> int:
    if len(argv) < 5 or argv[3] != "--":
        sys.stderr.write("usage: relay.py PORT SOCKET -- ARGV...\n")
        return 2
    port, socket_path, command = int(argv[1]), argv[2], argv[4:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    threading.Thread(target=_accept, args=(listener, socket_path), daemon=True).start()
    try:
        child = subprocess.Popen(command)
    except OSError as exc:
        sys.stderr.write(f"cannot start {command[0]!r}: {exc.strerror or exc}\n")
        return 127
    code = child.wait()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
