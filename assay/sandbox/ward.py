"""A ward: one sandbox kept for a run, which each of the run's calls enters.

Building a sandbox is most of what a short call costs (bubblewrap's namespaces and some
thirty mounts: 7 to 9 CPU-ms, against under 1 for the program itself; see
docs/benchmarks.md, "Sandbox"). A ``Ward`` builds it once, with the warden
(``assay.sandbox.warden``) as its PID 1, and each ``start``/``run`` asks the warden to run
one program there: the same mounts, namespaces and environment rule as a sandbox of its
own, and the same end, since the warden kills every other process of the namespace when
the call ends (or is killed, or times out) and empties the private ``/tmp`` and ``HOME``
before the next call. Calls run one at a time.

Unsandboxed (``isolation: off``) the warden runs bare, as a child subreaper: the one way
``start_sandboxed`` runs such a program, so that nothing it starts (a double-forked,
``setsid``'d daemon included) outlives the call or the supervisor.

The ward is started at its first call and rebuilt when it would no longer be the sandbox a
fresh one would be: its warden is gone, or the work tree, its ``.git`` or its ``.assay``
is not the folder that was mounted (replaced, or created since: it would not be read-only
inside). A spec a warden cannot serve (the gateway's network, whose relay must be the
first process, or no python toolchain for the warden itself) gets a sandbox per call, as
``start_sandboxed`` builds one. ``close`` (or the ward's collection, or the supervisor's
death) ends the warden and everything in the sandbox.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Unpack

from assay.sandbox.bwrap import PROTECTED, require_sandbox, warden_argv
from assay.sandbox.environ import process_environment
from assay.sandbox.process import (
    CallOptions,
    OutputCapture,
    ProcessResult,
    SandboxProcess,
    feed,
    start_sandboxed,
)
from assay.sandbox.spec import SandboxSpec
from assay.sandbox.warden import KILL, run_frame

WARDEN = str(Path(__file__).with_name("warden.py"))
_STOP_GRACE_S = 10.0  # for the warden to end its call and exit once the socket is closed
_MAX_LINE = 4096  # its lines are "started PID", "failed ERRNO MESSAGE" and "exit STATUS"


class WardGone(Exception):
    """The warden went away under a call (killed from outside, or its sandbox died)."""


class _Warden:
    """One warden process and the socket to it."""

    def __init__(self, cwd: Path, spec: SandboxSpec) -> None:
        self.cwd, self.spec = cwd, spec
        self.socket, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            descriptor = theirs.fileno()
            if spec.isolation == "on":
                argv = warden_argv(require_sandbox(), descriptor, cwd=cwd, spec=spec)
            else:
                argv = [os.path.realpath(sys.executable), "-I", "-S", WARDEN, str(descriptor)]
            self.process = subprocess.Popen(
                argv,
                cwd=cwd,
                env={},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,
                pass_fds=(descriptor,),
            )
        except BaseException:
            self.socket.close()
            raise
        finally:
            theirs.close()
        self.identity = _identity(cwd)
        self.lines = bytearray()

    def fresh(self) -> bool:
        """Still the sandbox a new one would be (see the module docstring)."""
        return self.process.poll() is None and _identity(self.cwd) == self.identity

    def send(self, message: bytes, descriptors: Sequence[int] = ()) -> None:
        try:
            if descriptors:
                self.socket.sendmsg([message], [_rights(descriptors)])
            else:
                self.socket.sendall(message)
        except OSError as exc:
            raise WardGone(f"the warden is gone: {exc}") from None

    def line(self, timeout: float | None) -> bytes | None:
        """The warden's next line, None if none came within ``timeout``; ``WardGone`` at EOF."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.lines:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self.socket], [], [], left)[0]:
                return None
            try:
                data = self.socket.recv(4096)
            except OSError:
                data = b""
            if not data:
                raise WardGone("the warden is gone")
            self.lines += data
            if len(self.lines) > _MAX_LINE:
                raise WardGone("the warden sent a line no warden sends")
        line, _, rest = bytes(self.lines).partition(b"\n")
        self.lines = bytearray(rest)
        return line

    def stop(self) -> None:
        """Close the socket (the warden ends what runs, then exits) and wait for it; a
        warden that does not go is killed with its sandbox."""
        with contextlib.suppress(OSError):
            self.socket.close()
        try:
            self.process.wait(timeout=_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def _rights(descriptors: Sequence[int]) -> tuple[int, int, bytes]:
    data = b"".join(d.to_bytes(4, sys.byteorder, signed=True) for d in descriptors)
    return (socket.SOL_SOCKET, socket.SCM_RIGHTS, data)


def _identity(cwd: Path) -> tuple[tuple[int, int] | None, ...]:
    """Which folders the work tree, its ``.git`` and ``.assay`` are (None: absent)."""
    found: list[tuple[int, int] | None] = []
    for path in (cwd, *(cwd / name for name in PROTECTED)):
        try:
            stat = os.stat(path)
            found.append((stat.st_dev, stat.st_ino))
        except OSError:
            found.append(None)
    return tuple(found)


class _Call:
    """One program run by the warden: the ``Lifetime`` of its ``SandboxProcess``."""

    def __init__(self, ward: Ward, warden: _Warden, pid: int, *, close_after: bool) -> None:
        self.ward, self.warden, self.pid = ward, warden, pid
        self.close_after = close_after
        self.code: int | None = None
        self.killed = False
        self.settled = False

    def poll(self) -> int | None:
        return self.wait(0)

    def wait(self, timeout: float | None) -> int | None:
        if self.code is None:
            try:
                line = self.warden.line(timeout)
            except WardGone:
                line = b"exit 9"  # killed with its sandbox: nothing of it is left
            if line is None:
                return None
            self.code = _exit_code(line)
        return self.code

    def kill(self) -> None:
        if self.code is None and not self.killed:
            self.killed = True
            with contextlib.suppress(WardGone):
                self.warden.send(KILL)

    def settle(self) -> int:
        self.kill()
        code = self.wait(None)
        assert code is not None
        if not self.settled:
            self.settled = True
            self.ward._done(self.warden, close=self.close_after)
        return code


def _exit_code(line: bytes) -> int:
    """``exit STATUS`` as ``subprocess`` reports it (negative for a signal); anything else
    the warden could say here is a warden that misbehaved: a killed call."""
    word, _, value = line.partition(b" ")
    if word == b"exit" and value.isdigit():
        return os.waitstatus_to_exitcode(int(value))
    return -9


class Ward:
    """The sandbox ``spec`` describes around ``cwd``, kept for many calls (module docstring)."""

    def __init__(self, cwd: Path, spec: SandboxSpec) -> None:
        self.cwd = Path(os.path.realpath(cwd))
        self.spec = spec
        self.kept = spec.isolation == "off" or (
            "python" in spec.toolchains and spec.network != "gateway"
        )
        self._warden: _Warden | None = None
        self._lock = threading.Lock()  # one call at a time
        self._finalizer: weakref.finalize[[], Ward] | None = None

    def start(
        self, argv: Sequence[str], *, close_after: bool = False, **options: Unpack[CallOptions]
    ) -> SandboxProcess:
        """Start ``argv`` in the ward; ``close_after``: end the warden with the call.

        Until the returned process's ``result()`` the ward serves no other call."""
        if not argv:
            raise ValueError("Ward.start: empty argv")
        if not self.kept:
            return start_sandboxed(argv, cwd=self.cwd, spec=self.spec, **options)
        self._lock.acquire()
        try:
            return self._start(list(argv), close_after, options)
        except BaseException:
            self._lock.release()
            raise

    def run(self, argv: Sequence[str], **options: Unpack[CallOptions]) -> ProcessResult:
        """Run ``argv`` to its end or its timeout; everything it started dies with it."""
        process = self.start(argv, **options)
        try:
            return process.result()
        except BaseException:
            process.kill()
            raise

    def _start(self, argv: list[str], close_after: bool, options: CallOptions) -> SandboxProcess:
        environment = process_environment(self.spec, options["env"])
        stdin = options.get("stdin")
        reader, writer = os.pipe()
        feeder = stdin_reader = None
        if stdin is not None:
            stdin_reader, feeder = os.pipe()
        passed = [writer] if stdin_reader is None else [writer, stdin_reader]
        try:
            warden = self._ready()
            try:
                warden.send(run_frame(str(self.cwd), argv, environment), passed)
            except WardGone:
                warden = self._ready(replace=True)  # gone since: one new warden, once
                warden.send(run_frame(str(self.cwd), argv, environment), passed)
        except BaseException:
            for descriptor in (reader, feeder):
                if descriptor is not None:
                    os.close(descriptor)
            raise
        finally:
            for descriptor in passed:
                os.close(descriptor)
        capture = OutputCapture(
            os.fdopen(reader, "rb"), options["max_output_bytes"], options.get("output_log")
        )
        if feeder is not None:
            stream = os.fdopen(feeder, "wb")
            threading.Thread(target=feed, args=(stream, stdin), daemon=True).start()
        try:
            answer = warden.line(None) or b""
        except WardGone:
            answer = b"failed 0 the warden is gone"
        word, _, rest = answer.partition(b" ")
        started = word == b"started" and rest.isdigit()
        call = _Call(self, warden, int(rest) if started else 0, close_after=close_after)
        if not started:
            call.code = 127  # cannot start: the warden wrote why to the output
        return SandboxProcess(
            call,
            capture,
            timeout_s=options["timeout_s"],
            sandboxed=self.spec.sandboxed,
            started=started,
        )

    def _ready(self, *, replace: bool = False) -> _Warden:
        warden = self._warden
        if warden is not None and (replace or not warden.fresh()):
            self._warden = None
            warden.stop()
            warden = None
        if warden is None:
            warden = self._warden = _Warden(self.cwd, self.spec)
            if self._finalizer is not None:
                self._finalizer.detach()
            self._finalizer = weakref.finalize(self, warden.stop)
        return warden

    def _done(self, warden: _Warden, *, close: bool) -> None:
        """A call settled: the ward serves the next one (or ends, for a one-call ward)."""
        try:
            if close and self._warden is warden:
                self._stop()
        finally:
            self._lock.release()

    def close(self) -> None:
        """End the warden and everything in the sandbox (a call in flight is killed)."""
        self._stop()

    def _stop(self) -> None:
        warden, self._warden = self._warden, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if warden is not None:
            warden.stop()

    def __enter__(self) -> Ward:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
