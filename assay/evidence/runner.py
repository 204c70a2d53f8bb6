"""The row runner: one acceptance row run as a process, its result captured safely.

- The command is the row's own text, nothing else: split with ``shlex`` and run as argv
  without a shell; only when it needs shell syntax (pipes, redirections, ``&&``,
  variables, globs) does it run as ``["/bin/sh", "-c", <row text>]``. No text from a
  brief's body, an issue or a comment is ever interpolated into it.
- It runs in the checked-out tree, in its own process group, with stdin closed and an
  environment stripped of secrets (tokens, keys, passwords, git plumbing variables).
- A timeout kills the whole process group (SIGKILL), so a row that forks cannot outlive it.
- stdout and stderr are read as one stream in chunks: the sha256 covers every byte, and
  only a bounded tail is kept, so a row printing gigabytes costs constant memory.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import re
import selectors
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from assay.journal.redact import is_credential_name

_PR_SET_DUMPABLE = 4
SECRET_LIST_ENV = "ASSAY_SECRET_ENV"
TAIL_BYTES = 4096
TAIL_LINES = 40
_CHUNK = 1 << 16
_DRAIN_GRACE_S = 1.0

# Characters that mean the row was written for a shell; anything else is plain argv.
_SHELL_SYNTAX = re.compile(r"[|&;<>()$`*?\[\]{}~\n\\#!]")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")

_DROPPED_NAMES = frozenset(
    {
        "SSH_AUTH_SOCK",
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_COMMON_DIR",
        "GIT_ASKPASS",
        "SSH_ASKPASS",
        "ASSAY_EVIDENCE_KEY",
        # The gate's own import path (often its own checkout) must not shadow the tree's.
        "PYTHONPATH",
        "PYTHONSTARTUP",
    }
)
_DROPPED_PREFIXES = ("AWS_", "AZURE_", "GOOGLE_APPLICATION", "ACTIONS_", "GITHUB_TOKEN")


def _declared_secret_names(source: Mapping[str, str]) -> frozenset[str]:
    """Names listed in ``$ASSAY_SECRET_ENV`` (comma-separated): secrets by declaration."""
    return frozenset(n.strip() for n in source.get(SECRET_LIST_ENV, "").split(",") if n.strip())


def is_secret_name(name: str) -> bool:
    """Whether an environment variable is withheld from rows."""
    return name in _DROPPED_NAMES or name.startswith(_DROPPED_PREFIXES) or is_credential_name(name)


def row_environment(
    base: Mapping[str, str] | None = None, *, keep: frozenset[str] = frozenset()
) -> dict[str, str]:
    """``base`` (default: ours) without the variables a row must not see, plus NO_COLOR."""
    source = os.environ if base is None else base
    declared = _declared_secret_names(source)
    env = {k: v for k, v in source.items() if k in keep or not (is_secret_name(k) or k in declared)}
    env.setdefault("NO_COLOR", "1")
    return env


def withheld_values(base: Mapping[str, str] | None = None, *, min_length: int = 8) -> list[str]:
    """The values of the variables rows do not get, to scrub from anything recorded.

    Short values ("1", "true") are left out: replacing them would mangle ordinary output.
    """
    source = os.environ if base is None else base
    declared = _declared_secret_names(source)
    return [
        v
        for k, v in source.items()
        if (is_secret_name(k) or k in declared) and k != SECRET_LIST_ENV and len(v) >= min_length
    ]


def shield_gate_process() -> bool:
    """Make this process non-dumpable (Linux), so rows cannot read its memory or environ.

    Rows run the branch's code as the gate's user; without this, a row could read the
    gate's secrets from ``/proc/<gate pid>/environ`` even though its own environment is
    stripped. ``execve`` resets the flag, so rows themselves are unaffected. Best effort:
    returns False where ``prctl`` is unavailable.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def row_argv(command: str) -> list[str]:
    """The argv that runs ``command``: plain argv when possible, else ``/bin/sh -c``."""
    if _SHELL_SYNTAX.search(command) or _ASSIGNMENT.match(command.lstrip()):
        return ["/bin/sh", "-c", command]
    try:
        argv = shlex.split(command)
    except ValueError:
        return ["/bin/sh", "-c", command]
    return argv if argv else ["/bin/sh", "-c", command]


@dataclass(frozen=True)
class RowRun:
    """What running one row produced."""

    exit: int
    seconds: float
    output_sha256: str
    output_bytes: int
    output_tail: str
    timed_out: bool

    @property
    def passed(self) -> bool:
        return self.exit == 0 and not self.timed_out


class _Tail:
    """The last ``limit`` bytes of a stream, in constant memory."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.buffer = bytearray()

    def add(self, chunk: bytes) -> None:
        self.buffer += chunk
        if len(self.buffer) > 2 * self.limit:
            del self.buffer[: len(self.buffer) - self.limit]

    def text(self, *, lines: int) -> str:
        data = bytes(self.buffer[-self.limit :])
        text = data.decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def run_row(
    command: str,
    *,
    cwd: Path,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    tail_bytes: int = TAIL_BYTES,
    tail_lines: int = TAIL_LINES,
) -> RowRun:
    """Run one row in ``cwd`` and return its exit, duration, output digest and tail.

    A row killed at its timeout reports ``timed_out`` and the signal exit (-9). A command
    that cannot start (no such program) is a failed row with exit 127, as a shell says.
    """
    digest = hashlib.sha256()
    tail = _Tail(tail_bytes)
    total = 0
    started = time.monotonic()
    try:
        process = subprocess.Popen(
            row_argv(command),
            cwd=cwd,
            env=dict(row_environment() if env is None else env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        message = f"assay: cannot start row: {exc}".encode()
        digest.update(message)
        return RowRun(
            exit=127,
            seconds=round(time.monotonic() - started, 3),
            output_sha256="sha256:" + digest.hexdigest(),
            output_bytes=len(message),
            output_tail=message.decode(),
            timed_out=False,
        )
    assert process.stdout is not None
    pgid = process.pid  # start_new_session: the child leads its own group
    deadline = started + timeout_s
    timed_out = False
    drain_until: float | None = None
    fd = process.stdout.fileno()
    os.set_blocking(fd, False)
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while True:
                now = time.monotonic()
                if drain_until is None and process.poll() is not None:
                    # The row finished; whatever it left running may still hold the pipe.
                    drain_until = now + _DRAIN_GRACE_S
                limit = deadline if drain_until is None else min(deadline, drain_until)
                if now >= limit:
                    if drain_until is None:
                        timed_out = True
                    break
                events = selector.select(timeout=min(limit - now, 0.5))
                if not events:
                    continue
                try:
                    chunk = os.read(fd, _CHUNK)
                except BlockingIOError:
                    continue
                if not chunk:
                    break
                digest.update(chunk)
                tail.add(chunk)
                total += len(chunk)
        if not timed_out:
            # The stream ended; the row itself may still be running (it closed its output).
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
    except BaseException:
        # Interrupted (Ctrl-C, a bug): the row must not outlive the gate either.
        _kill_group(pgid)
        process.stdout.close()
        process.wait()
        raise
    # Kill the group in every case: nothing a row started may outlive it.
    _kill_group(pgid)
    process.stdout.close()
    returncode = process.wait()
    seconds = round(time.monotonic() - started, 3)
    return RowRun(
        exit=returncode,
        seconds=seconds,
        output_sha256="sha256:" + digest.hexdigest(),
        output_bytes=total,
        output_tail=tail.text(lines=tail_lines),
        timed_out=timed_out,
    )
