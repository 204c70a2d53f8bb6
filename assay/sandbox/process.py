"""The one process runner of Assay: every agent-chosen or branch-chosen command runs here.

``start_sandboxed`` starts ``argv`` inside bubblewrap (see ``assay.sandbox.bwrap``) in its
own session and process group, with exactly the environment it is given (built from
scratch by the caller: ``assay.sandbox.environ``), stdin closed or fed from bytes, stdout
and stderr as one stream read in chunks: a sha256 of every byte, a byte count, and a
bounded head and tail, so a process printing gigabytes costs constant memory.
``run_sandboxed`` is the same to completion or timeout. Killing it (timeout, ``kill()``,
an exception, the supervisor's death) ends the PID namespace and so everything in it.
Unsandboxed (``isolation: off``) the program runs below a bare warden instead, a child
subreaper that ends everything below it the same way (``assay.sandbox.ward``). How a
started process ends is its ``Lifetime``: bubblewrap's here, a ward's call there.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, NotRequired, Protocol, TypedDict, Unpack

from assay.sandbox.bwrap import bwrap_argv, require_sandbox
from assay.sandbox.environ import process_environment
from assay.sandbox.spec import GatewayEndpoint, SandboxSpec

_CHUNK = 1 << 16
_DRAIN_GRACE_S = 2.0
_NAMESPACE_GRACE_S = 30.0


@dataclass(frozen=True)
class ProcessResult:
    """What one sandboxed process produced."""

    exit: int  # the return code; negative for a signal (-9 after a timeout's kill)
    timed_out: bool
    seconds: float
    output_sha256: str  # "sha256:<hex>" of every byte of stdout + stderr
    output_bytes: int
    head: bytes  # the first max_output_bytes // 2 bytes
    tail: bytes  # the last bytes after head (all of the rest unless truncated)
    sandboxed: bool
    started: bool = True  # False: the program does not exist (or cannot run) in the sandbox

    @property
    def truncated(self) -> bool:
        return self.output_bytes > len(self.head) + len(self.tail)

    @property
    def passed(self) -> bool:
        return self.exit == 0 and not self.timed_out

    def output(self) -> str:
        """Head and tail as text, with a marker for the bytes in between."""
        head = self.head.decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        if not self.truncated:
            return (self.head + self.tail).decode("utf-8", "replace")
        skipped = self.output_bytes - len(self.head) - len(self.tail)
        return f"{head}\n[... {skipped} bytes of output skipped ...]\n{tail}"

    def last(self, limit: int, *, lines: int | None = None) -> str:
        """The last ``limit`` bytes (and at most ``lines`` lines) of the output."""
        data = (self.head + self.tail) if not self.truncated else self.tail
        text = data[-limit:].decode("utf-8", "replace")
        return text if lines is None else "\n".join(text.splitlines()[-lines:])


class OutputCapture:
    """Reads one stream to its end: digest, count, head and rolling tail."""

    def __init__(self, stream: IO[bytes], limit: int, log: Path | None) -> None:
        self.stream = stream
        self.head_limit = max(0, limit // 2)
        self.tail_limit = max(0, limit - self.head_limit)
        self.digest = hashlib.sha256()
        self.total = 0
        self.head = bytearray()
        self.tail = bytearray()
        self.log = log
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        sink = open(self.log, "ab") if self.log is not None else None  # noqa: SIM115
        try:
            while True:
                chunk = self.stream.read1(_CHUNK)  # type: ignore[attr-defined]
                if not chunk:
                    break
                self._add(chunk)
                if sink is not None:
                    sink.write(chunk)
                    sink.flush()
        except (OSError, ValueError):
            pass  # closed under us after the drain grace: what was read is kept
        finally:
            if sink is not None:
                sink.close()

    def _add(self, chunk: bytes) -> None:
        self.digest.update(chunk)
        self.total += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > 2 * self.tail_limit + _CHUNK:
            del self.tail[: len(self.tail) - self.tail_limit]

    def finish(self, grace_s: float) -> None:
        self.thread.join(grace_s)
        with contextlib.suppress(OSError):
            self.stream.close()
        self.thread.join(1.0)


class Lifetime(Protocol):
    """How a started process ends: bubblewrap's (``_Bubblewrap``) or a call in a ward's
    (``assay.sandbox.ward``). ``settle`` returns only once nothing it started is left."""

    pid: int

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None) -> int | None: ...  # None: still running

    def kill(self) -> None: ...

    def settle(self) -> int: ...  # kill what is left, wait for all of it: the exit code


class SandboxProcess:
    """A started sandboxed process (an agent CLI, a row, a tool command)."""

    def __init__(
        self,
        lifetime: Lifetime,
        capture: OutputCapture,
        *,
        timeout_s: float | None,
        sandboxed: bool,
        started: bool = True,
    ) -> None:
        self.lifetime = lifetime
        self.capture = capture
        self.sandboxed = sandboxed
        self.started = time.monotonic()
        self.deadline = None if timeout_s is None else self.started + timeout_s
        self.timed_out = False
        self.unstartable = not started
        self._result: ProcessResult | None = None

    @property
    def pid(self) -> int:
        """bubblewrap's pid (outside the namespace: its group is the whole sandbox), or the
        program's in a ward (as the warden sees it)."""
        return self.lifetime.pid

    def poll(self) -> int | None:
        return self.lifetime.poll()

    def kill(self) -> None:
        """Kill everything the process started (the namespace, or the ward's call)."""
        self.lifetime.kill()

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code, or None if still running after ``timeout`` seconds.

        Past the process's own deadline it is killed and marked ``timed_out``.
        """
        limits = [t for t in (timeout, self._remaining()) if t is not None]
        code = self.lifetime.wait(min(limits) if limits else None)
        if code is not None:
            return code
        remaining = self._remaining()
        if remaining is not None and remaining <= 0:
            self.timed_out = True
            self.kill()
            return self.lifetime.wait(None)
        return None

    def _remaining(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def result(self) -> ProcessResult:
        """Wait for the end (or the deadline), kill what is left, and report."""
        if self._result is not None:
            return self._result
        try:
            while self.wait() is None:
                pass
        finally:
            # Nothing started inside may outlive the call, whatever happened.
            code = self.lifetime.settle()
            self.capture.finish(_DRAIN_GRACE_S)
        started = not self.unstartable
        if code == 1 and bytes(self.capture.head).startswith(b"bwrap: execvp"):
            code, started = 127, False  # no such program inside the sandbox, as a shell says
        capture = self.capture
        tail = bytes(capture.tail[-capture.tail_limit :]) if capture.tail_limit else b""
        self._result = ProcessResult(
            exit=code,
            timed_out=self.timed_out,
            seconds=round(time.monotonic() - self.started, 3),
            output_sha256="sha256:" + capture.digest.hexdigest(),
            output_bytes=capture.total,
            head=bytes(capture.head),
            tail=tail,
            sandboxed=self.sandboxed,
            started=started,
        )
        return self._result

    def __enter__(self) -> SandboxProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
        self.result()


class _Bubblewrap:
    """One bubblewrap process: its group is the sandbox, and the namespace's init (a pidfd
    from bwrap's status line) tells when everything in it is gone."""

    def __init__(
        self, process: subprocess.Popen[bytes], init: int | None, status: IO[bytes] | None
    ) -> None:
        self.process = process
        self.pid = process.pid
        self.init = init
        self.status = status

    def poll(self) -> int | None:
        return self.process.poll()

    def wait(self, timeout: float | None) -> int | None:
        try:
            return _wait_for_exit(self.process, timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """Kill bwrap's group; its namespace dies with it (``--die-with-parent``)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def settle(self) -> int:
        self.kill()
        code = self.process.wait()
        _await_exit(self.init, _NAMESPACE_GRACE_S)
        self.init = None
        if self.status is not None:
            self.status.close()
        return code


def _namespace_init(stream: IO[bytes]) -> int | None:
    """A pidfd of the namespace's init, from bwrap's first JSON status line (``child-pid``).

    Opened at once, while bwrap still holds that child, so a reused pid cannot be mistaken
    for it later. The stream stays open until the process ends: bwrap writes its exit
    status there too, and a closed pipe would kill it with SIGPIPE."""
    line = stream.readline()
    try:
        pid = json.loads(line).get("child-pid")
    except ValueError:
        return None  # bwrap failed before it cloned: nothing to wait for
    if not isinstance(pid, int):
        return None
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        return None  # already gone


def _wait_for_exit(process: subprocess.Popen[bytes], timeout: float | None) -> int:
    """``process.wait(timeout)`` woken the moment the process exits: Popen's own timed wait
    polls with sleeps of up to 50 ms, which every short row and tool call paid. A pidfd
    becomes readable at the exit (a zombie not reaped yet keeps its pid, so it cannot be
    another process's)."""
    if timeout is None or process.returncode is not None:
        return process.wait()
    try:
        pidfd = os.pidfd_open(process.pid)
    except OSError:  # a kernel without pidfds
        return process.wait(timeout=timeout)
    try:
        readable, _, _ = select.select([pidfd], [], [], timeout)
    finally:
        os.close(pidfd)
    if not readable:
        raise subprocess.TimeoutExpired(process.args, timeout)
    return process.wait()


def _await_exit(pidfd: int | None, timeout_s: float) -> None:
    """Wait until the process behind ``pidfd`` has exited, then close it; for a PID
    namespace's init that means every process in it is gone (the kernel kills and reaps
    them before init's own exit is reported)."""
    if pidfd is None:
        return
    try:
        select.select([pidfd], [], [], timeout_s)
    finally:
        os.close(pidfd)


class StartOptions(TypedDict):
    """How :func:`start_sandboxed` runs a program; :func:`run_sandboxed` takes the same."""

    cwd: Path
    env: Mapping[str, str]
    spec: SandboxSpec
    timeout_s: float | None
    max_output_bytes: int
    gateway: NotRequired[GatewayEndpoint | None]
    stdin: NotRequired[bytes | None]
    output_log: NotRequired[Path | None]


def start_sandboxed(argv: Sequence[str], **options: Unpack[StartOptions]) -> SandboxProcess:
    """Start ``argv`` in the sandbox ``spec`` describes; see the module docstring.

    ``env`` is the whole environment (bwrap passes it through; nothing is inherited, and
    no value appears on a command line). ``HOME`` and ``TMPDIR`` point into the private
    ``/tmp``. ``output_log`` also receives every byte of output as it arrives. A program
    that does not exist inside the sandbox exits 127. ``SandboxUnavailable`` (78) when
    bubblewrap cannot run here and the spec does not say ``isolation: off``.
    """
    if not argv:
        raise ValueError("start_sandboxed: empty argv")
    cwd, spec, stdin = options["cwd"], options["spec"], options.get("stdin")
    if spec.isolation == "off":
        # Unsandboxed, a warden that is a child subreaper stands between the supervisor and
        # the program: nothing the program starts outlives the call or the supervisor.
        from assay.sandbox.ward import Ward

        return Ward(cwd, spec).start(argv, close_after=True, **_call_options(options))
    environment = process_environment(spec, options["env"])
    executable = require_sandbox()
    status, status_writer = os.pipe()
    full = bwrap_argv(
        executable,
        list(argv),
        cwd=cwd,
        spec=spec,
        gateway=options.get("gateway"),
        status_fd=status_writer,
    )
    try:
        process, started = _spawn(full, cwd, environment, stdin is not None, status_writer)
    finally:
        os.close(status_writer)
    status_stream = os.fdopen(status, "rb")
    init = _namespace_init(status_stream)
    assert process.stdout is not None
    capture = OutputCapture(process.stdout, options["max_output_bytes"], options.get("output_log"))
    if stdin is not None:
        threading.Thread(target=feed, args=(process.stdin, stdin), daemon=True).start()
    return SandboxProcess(
        _Bubblewrap(process, init, status_stream),
        capture,
        timeout_s=options["timeout_s"],
        sandboxed=spec.sandboxed,
        started=started,
    )


class CallOptions(TypedDict):
    """What one call in a ward takes (``Ward.start``): ``StartOptions`` without the
    sandbox's own (its tree, spec and gateway)."""

    env: Mapping[str, str]
    timeout_s: float | None
    max_output_bytes: int
    stdin: NotRequired[bytes | None]
    output_log: NotRequired[Path | None]


def _call_options(options: StartOptions) -> CallOptions:
    call: CallOptions = {
        "env": options["env"],
        "timeout_s": options["timeout_s"],
        "max_output_bytes": options["max_output_bytes"],
    }
    if "stdin" in options:
        call["stdin"] = options["stdin"]
    if "output_log" in options:
        call["output_log"] = options["output_log"]
    return call


def _spawn(
    argv: list[str], cwd: Path, env: dict[str, str], piped: bool, status_fd: int
) -> tuple[subprocess.Popen[bytes], bool]:
    """The process (its own session and group), and whether ``argv`` could be started; one
    that cannot is reported like any other run (exit 127, the reason as output)."""
    try:
        process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE if piped else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=(status_fd,),
        )
        return process, True
    except OSError as exc:
        failed = subprocess.Popen(
            ["/bin/sh", "-c", 'printf "%s\\n" "$1"; exit 127', "sh", f"cannot start: {exc}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        return failed, False


def feed(stream: IO[bytes] | None, data: bytes) -> None:
    """Write ``data`` to a program's stdin and close it (a thread's body: the program may
    read it slowly, or never)."""
    if stream is None:
        return  # the program could not be started: nothing reads
    with contextlib.suppress(OSError):
        stream.write(data)
    with contextlib.suppress(OSError):
        stream.close()


def run_sandboxed(argv: Sequence[str], **options: Unpack[StartOptions]) -> ProcessResult:
    """Run ``argv`` to its end or its timeout in the sandbox; everything it started dies."""
    process = start_sandboxed(argv, **options)
    try:
        return process.result()
    except BaseException:
        process.kill()
        raise
