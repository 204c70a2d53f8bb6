"""``assay desk host``: a resident, pre-imported desk process that forks a child per wake.

Waking a run used to start two interpreters in series (the receive hook's waker, then
``assay desk run``), each paying Python's start-up and Assay's imports before the first
fetch. The host pays them once: it imports the desk loop, the runtime, the model adapters
and libgit2 at start, then waits on a Unix socket. The forge's post-receive hook
(:func:`assay.sweep.hook.install_wake_hook` with ``host_socket``) writes ``wake <brief>``
lines to that socket; for each one the host forks a child that does what ``assay wake
--brief <brief>`` does (resume the waiting run if its event has arrived) and exits.

Safety is the claims': a child claims the brief by the same CAS as any desk, so two wakes
of one brief (two hosts, a host and a sweep) cannot both run it. The host itself holds no
claim, no forge handle and no libgit2 handle (a child must not inherit one mid-use), and it
runs one child per brief at a time (a wake that arrives while one runs is remembered and
served when it ends). Children die with the host (``PR_SET_PDEATHSIG``): a host SIGKILLed
mid-run leaves claims that lapse like any crashed desk's, and the runs resume from their
pushed journals.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import select
import signal
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assay.errors import AssayError, BadInput
from assay.ids import check_id
from assay.odb import forget_all

# What a woken run needs, imported once in the host so every child starts warm.
PRELOAD = (
    "assay.desks.host.loop",
    "assay.desks.host.resync",
    "assay.desks.host.session",
    "assay.desks.kinds.agent",
    "assay.runtime",
    "assay.models",
    "assay.models.scripted",
    "assay.models.openai",
    "assay.models.anthropic",
    "assay.models.command",
    "assay.desks.kinds.tools",
    "assay.evidence.gate",
    "assay.odb",
    "assay.forgestate.source",  # the wake's view (read_snapshot): Jinja2 and all, ~0.1 s cold
    "assay.forge.lsrefs",
    "pygit2",
    "httpx",
)
_PR_SET_PDEATHSIG = 1
MAX_LINE = 256


def preload(modules: tuple[str, ...] = PRELOAD) -> list[str]:
    """Import ``modules`` (the ones that exist); the names imported."""
    loaded = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        loaded.append(name)
    return loaded


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux; else nothing)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return


def parse_wake(line: bytes) -> str | None:
    """The brief id of a ``wake <brief>`` line, or None when the line is anything else."""
    parts = line.decode("ascii", "replace").split()
    if len(parts) != 2 or parts[0] != "wake":
        return None
    try:
        return check_id(parts[1])
    except BadInput:
        return None


@dataclass
class DeskHost:
    """The socket, the children and what each child runs (``wake_one(brief) -> exit code``)."""

    socket_path: Path
    wake_one: Callable[[str], int]
    on_line: Callable[[str], None] = lambda line: None
    children: dict[int, str] = field(default_factory=dict)  # pid -> brief
    pending: set[str] = field(default_factory=set)
    exits: list[tuple[str, int]] = field(default_factory=list)
    _stopping: bool = False

    def bind(self) -> socket.socket:
        """Listen on ``socket_path`` (mode 0600: only this user's hook may wake it)."""
        path = Path(self.socket_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            server.bind(str(path))
        finally:
            os.umask(old)
        server.listen(64)
        return server

    def stop(self, *_: Any) -> None:
        self._stopping = True

    def serve_forever(self, server: socket.socket) -> None:
        """Accept wakes until stopped (SIGTERM), then wait for the running children.

        A child's exit wakes the loop at once (SIGCHLD through a wake-up pipe), so it is
        reaped, and a wake that waited for it is served, without polling."""
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        previous = signal.set_wakeup_fd(wake_w)
        try:
            while not self._stopping:
                try:
                    readable, _, _ = select.select([server.fileno(), wake_r], [], [], 5.0)
                except InterruptedError:
                    readable = []
                if wake_r in readable:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_r, 512)
                if server.fileno() in readable:
                    self._accept(server)
                self.reap()
        finally:
            signal.set_wakeup_fd(previous)
            os.close(wake_r)
            os.close(wake_w)
            server.close()
            with contextlib.suppress(FileNotFoundError):
                Path(self.socket_path).unlink()
            while self.children:
                self.reap(block=True)

    def _accept(self, server: socket.socket) -> None:
        connection, _ = server.accept()
        with connection:
            connection.settimeout(2.0)
            data = b""
            with contextlib.suppress(OSError):
                while len(data) < 64 * MAX_LINE and (chunk := connection.recv(4096)):
                    data += chunk
        for line in data.splitlines():
            brief = parse_wake(line[:MAX_LINE])
            if brief is not None:
                self.request(brief)

    def request(self, brief: str) -> None:
        """Wake ``brief`` now, or when its running child ends."""
        if brief in self.children.values():
            self.pending.add(brief)
            return
        self.spawn(brief)

    def spawn(self, brief: str) -> int:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: never returns into the host's loop
            code = 70
            try:
                die_with_parent()
                forget_all()  # never use a libgit2 handle the host opened (none, normally)
                signal.set_wakeup_fd(-1)
                for number in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
                    signal.signal(number, signal.SIG_DFL)
                code = self.wake_one(brief)
            except BaseException:  # a bug here must not keep a forked host alive
                code = 70
            finally:
                os._exit(code)
        self.children[pid] = brief
        self.on_line(f"wake {brief}: child {pid}")
        return pid

    def reap(self, *, block: bool = False) -> None:
        for pid in list(self.children):
            try:
                done, status = os.waitpid(pid, 0 if block else os.WNOHANG)
            except ChildProcessError:
                done, status = pid, 0
            if not done:
                continue
            brief = self.children.pop(pid)
            code = os.waitstatus_to_exitcode(status)
            self.exits.append((brief, code))
            self.on_line(f"woke {brief}: child {pid} exited {code}")
            if brief in self.pending and not self._stopping:
                self.pending.discard(brief)
                self.spawn(brief)
            if block:
                return


def wake_in_child(
    forge_spec: str, desks_dir: Path, *, workroot: Path, cache: Path | None, log: Path | None
) -> Callable[[str], int]:
    """What a child runs: ``assay wake --brief B`` in process (its output to ``log``)."""

    def wake_one(brief: str) -> int:
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.dup2(out, 1)
            os.dup2(out, 2)
            os.close(out)
        from assay.desks.host.loop import exit_code
        from assay.desks.host.resync import wake
        from assay.desks.manifests.manifest import split_desks
        from assay.forge import open_forge

        try:
            # A bad manifest leaves out its own desk, not the others.
            desks, bad = split_desks(desks_dir)
            for error in bad.values():
                print(f"wake {brief}: {error.status}: {error.message}", file=sys.stderr, flush=True)
            with open_forge(forge_spec, cache_dir=cache) as forge:
                reports = wake(forge, desks, workroot=workroot, only=brief)
        except AssayError as error:
            print(f"wake {brief}: {error.status}: {error.message}", file=sys.stderr, flush=True)
            return error.code
        for report in reports:
            print(f"woke {report.brief}: {report.status} ({report.code})", flush=True)
        return exit_code(reports, nothing=0)

    return wake_one
