"""Forge fixtures shared by every test area: embedded forges, smart HTTP, ``git daemon``.

These names are a stable interface for all test areas (loaded by ``tests/conftest.py``):

Fixtures
    ``forge_path``    a fresh embedded forge (``init_forge``) in the test's tmp dir: Path
    ``forge``         an open :class:`assay.forge.Forge` on ``forge_path`` (closed after)
    ``http_forge``    ``forge_path`` served over smart HTTP on 127.0.0.1: :class:`Served`
    ``daemon_forge``  ``forge_path`` served by ``git daemon`` (pushes on): :class:`Served`
    ``forge_url``     parametrised over ``file``, ``daemon``, ``http``: the URL (str)
    ``assay_state``   (autouse) ``ASSAY_STATE`` points into the test's tmp dir, so forge
                      caches never land in ``~/.cache``

Helpers
    ``free_port()``, ``wait_until(predicate, timeout=..., what=...)``,
    ``clone(url, dest)``, ``put_on_main(path_or_url, files, message=...)``,
    ``serve_http(path)`` and ``serve_daemon(path)`` (a :class:`Served` you stop yourself),
    ``serve_process(path)`` (``assay forge serve`` in a child process: yields its URL).

A :class:`Served` forge has ``.url``, ``.path``, ``.stop()`` and ``.start()``; ``start()``
after ``stop()`` serves again on the same port (tests of "the forge went down").
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import pytest

from assay.forge import Forge, ForgeServer, init_forge, open_forge
from assay.forge.memory import MemoryForge
from assay.plumbing import ASSAY_IDENTITY, Identity, RefUpdate

T = TypeVar("T")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(
    predicate: Callable[[], T], *, timeout: float = 20.0, interval: float = 0.02, what: str = ""
) -> T:
    """Poll ``predicate`` until it returns something truthy; fail the test at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what or predicate}")
        time.sleep(interval)


def files_named(root: Path, name: str) -> list[Path]:
    """Every file called ``name`` under ``root``, read while other processes change the tree.

    ``Path.rglob`` raises when a directory it listed is removed before it descends into it
    (a gate's scratch checkouts come and go under its TMPDIR); ``os.walk`` skips it."""
    return [Path(top) / name for top, _dirs, files in os.walk(root) if name in files]


def _git(*args: str, cwd: Path | None = None) -> str:
    env = {**os.environ, **ASSAY_IDENTITY.env(), "GIT_TERMINAL_PROMPT": "0"}
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stderr}")
    return done.stdout.strip()


def clone(url: str, dest: Path) -> Path:
    """A working clone of a forge (any URL git understands) at ``dest``."""
    _git("clone", "--quiet", url, str(dest))
    return dest


def put_on_main(
    where: str | Path,
    files: Mapping[str, str | bytes],
    *,
    message: str = "test: add files to main",
    author: Identity = ASSAY_IDENTITY,
) -> str:
    """Add or replace ``files`` on the forge's main (keeping the rest); return the commit."""
    with open_forge(str(where)) as forge:
        tip = forge.fetch("refs/heads/main").get("refs/heads/main")
        current: dict[str, bytes] = {}
        if tip:
            names = forge.list_tree(tip, "")
            for name, blob in zip(names, forge.read_blobs([(tip, n) for n in names]), strict=True):
                current[name] = blob or b""
        for name, content in files.items():
            current[name] = content.encode() if isinstance(content, str) else content
        commit = forge.commit(current, parents=[tip] if tip else [], message=message, author=author)
        result = forge.push([RefUpdate("refs/heads/main", commit, expected=tip)])
        assert result.ok, result
        return commit


class Served:
    """A forge served by some server process or thread: ``url``, ``stop()``, ``start()``."""

    def __init__(self, path: Path, url: str, start: Callable[[], None], stop: Callable[[], None]):
        self.path = path
        self.url = url
        self._start = start
        self._stop = stop
        self.running = False

    def start(self) -> Served:
        self._start()
        self.running = True
        return self

    def stop(self) -> None:
        if self.running:
            self._stop()
            self.running = False


def serve_http(path: Path) -> Served:
    """Serve ``path`` over smart HTTP (git http-backend) from a thread of this process."""
    servers = [ForgeServer(path)]
    port = servers[0].port
    url = servers[0].url

    def start() -> None:
        if not servers:
            servers.append(ForgeServer(path, port=port))
        servers[0].start()

    def stop() -> None:
        while servers:
            servers.pop().stop()

    return Served(path, url, start, stop).start()


@contextlib.contextmanager
def serve_process(path: Path) -> Iterator[str]:
    """``assay forge serve`` in a child process (its URL): its PATH and threads are its own,
    so a client's PATH wrapper or a forking benchmark sees only the client."""
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "assay", "forge", "serve", str(path), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()


def serve_daemon(path: Path) -> Served:
    """Serve ``path`` with ``git daemon`` (receive-pack on) on a free 127.0.0.1 port."""
    port = free_port()
    procs: list[subprocess.Popen[bytes]] = []
    url = f"git://127.0.0.1:{port}/{path.name}"

    def start() -> None:
        proc = subprocess.Popen(
            [
                "git",
                "daemon",
                "--reuseaddr",
                "--listen=127.0.0.1",
                f"--port={port}",
                f"--base-path={path.parent}",
                "--export-all",
                "--enable=receive-pack",
                "--informative-errors",
                "--max-connections=64",
                str(path),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        procs.append(proc)

        def ready() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"git daemon exited with {proc.returncode}")
            done = subprocess.run(
                ["git", "ls-remote", url], capture_output=True, timeout=10, check=False
            )
            return done.returncode == 0

        wait_until(ready, timeout=20, what="git daemon to answer")

    def stop() -> None:
        while procs:
            proc = procs.pop()
            os.killpg(proc.pid, 15)
            proc.wait(timeout=10)

    return Served(path, url, start, stop).start()


@pytest.fixture(autouse=True)
def assay_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point ``ASSAY_STATE`` (forge caches and other local state) and the gate's own state
    (``ASSAY_GATE_STATE``: its key, never under ``ASSAY_STATE``) into the tmp dir."""
    state = tmp_path / "assay-state"
    monkeypatch.setenv("ASSAY_STATE", str(state))
    monkeypatch.setenv("ASSAY_GATE_STATE", str(tmp_path / "gate-state"))
    return state


@pytest.fixture
def forge_path(tmp_path: Path) -> Path:
    """A fresh embedded forge: main holds briefs/ and .gitattributes."""
    return init_forge(tmp_path / "forge.git")


@pytest.fixture
def forge(forge_path: Path) -> Iterator[Forge]:
    """The git layer of ``forge_path``, opened over file://."""
    with open_forge(str(forge_path)) as opened:
        yield opened


@pytest.fixture(params=["git", "memory"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """The records layer's two backends, for a test of record logic to run on each: the
    git forge (a fresh embedded forge over file://) and ``MemoryForge`` (no disk, no
    process), which must answer by the same compare-and-swap rules."""
    if request.param == "memory":
        yield MemoryForge(state_dir=tmp_path / "memory-state")
        return
    with open_forge(str(init_forge(tmp_path / "forge.git"))) as opened:
        yield opened


@pytest.fixture
def http_forge(forge_path: Path) -> Iterator[Served]:
    """``forge_path`` served over smart HTTP on 127.0.0.1 (a thread of this process)."""
    served = serve_http(forge_path)
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture
def daemon_forge(forge_path: Path) -> Iterator[Served]:
    """``forge_path`` served by ``git daemon`` with receive-pack enabled."""
    served = serve_daemon(forge_path)
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture(params=["file", "daemon", "http"])
def forge_url(request: pytest.FixtureRequest, forge_path: Path) -> Iterator[str]:
    """The same fresh forge over each transport in turn: file://, git://, http://."""
    if request.param == "file":
        yield f"file://{forge_path}"
        return
    served = serve_daemon(forge_path) if request.param == "daemon" else serve_http(forge_path)
    try:
        yield served.url
    finally:
        served.stop()
