"""A gateway killed outright leaves its socket folder in the temporary folder; the next
gateway removes such folders, and only those: never a live gateway's, a young one, one
holding anything else, or a plain file with the same name."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from assay.gateway.server import (
    DEAD_AFTER_S,
    FOLDER_PREFIX,
    SOCKET_NAME,
    remove_dead_gateway_folders,
)
from tests.conftest import REPO_ROOT


def _aged(path: Path) -> Path:
    past = time.time() - DEAD_AFTER_S - 5
    os.utime(path, (past, past))
    return path


def _folder_with_socket(root: Path, name: str, *, listening: bool) -> tuple[Path, socket.socket]:
    folder = root / f"{FOLDER_PREFIX}{name}"
    folder.mkdir()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(folder / SOCKET_NAME))
    if listening:
        server.listen(4)
    return folder, server


def test_only_dead_old_socket_folders_of_ours_are_removed(tmp_path: Path) -> None:
    dead, dead_socket = _folder_with_socket(tmp_path, "dead", listening=False)
    dead_socket.close()  # what SIGKILL leaves: the socket file, nobody serving it
    live, live_socket = _folder_with_socket(tmp_path, "live", listening=True)
    young, young_socket = _folder_with_socket(tmp_path, "young", listening=False)
    young_socket.close()
    other = tmp_path / f"{FOLDER_PREFIX}other"
    other.mkdir()
    (other / "notes.txt").write_text("not a gateway's\n")
    empty = tmp_path / f"{FOLDER_PREFIX}empty"
    empty.mkdir()
    plain = tmp_path / f"{FOLDER_PREFIX}file"
    plain.write_text("a file, not a folder\n")
    for path in (dead, live, other, empty, plain):
        _aged(path)
    try:
        removed = remove_dead_gateway_folders(tmp_path)
        assert sorted(removed) == sorted([dead, empty])
        assert not dead.exists() and not empty.exists()
        assert live.exists() and young.exists() and other.exists() and plain.exists()
        assert (live / SOCKET_NAME).exists()
    finally:
        live_socket.close()


def test_a_sigkilled_gateways_folder_is_gone_once_the_next_gateway_starts(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(REPO_ROOT)}
    starts = (
        "from assay.gateway.server import Gateway\n"
        "g = Gateway().start()\n"
        "print(g.socket_path.parent, flush=True)\n"
        "input()\n"
    )

    def gateway() -> tuple[subprocess.Popen[bytes], Path]:
        child = subprocess.Popen(
            [sys.executable, "-c", starts], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert child.stdout is not None
        return child, Path(child.stdout.readline().decode().strip())

    first, folder = gateway()
    assert folder.parent == tmp_path and (folder / SOCKET_NAME).exists()
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    assert (folder / SOCKET_NAME).exists()  # nobody could clean up
    _aged(folder)
    second, its_folder = gateway()
    try:
        assert not folder.exists()
        assert (its_folder / SOCKET_NAME).exists()
    finally:
        second.kill()
        second.communicate(timeout=30)
