"""The row runner: one acceptance row run as a process, its result captured safely.

- The command is the row's own text, nothing else: split with ``shlex`` and run as argv
  without a shell; only when it needs shell syntax (pipes, redirections, ``&&``,
  variables, globs) does it run as ``["/bin/sh", "-c", <row text>]``. No text from a
  brief's body, an issue or a comment is ever interpolated into it.
- It runs in the sandbox (``assay.sandbox``): the checked-out tree its only writable path,
  no network, its own PID namespace, stdin closed and an environment stripped of secrets
  (tokens, keys, passwords, git plumbing variables).
- A timeout, or the gate's own death, kills the whole namespace, so a row that forks (or
  ``setsid``s) cannot outlive it.
- stdout and stderr are read as one stream in chunks: the sha256 covers every byte, and
  only a bounded tail is kept, so a row printing gigabytes costs constant memory.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from assay.journal.redact import is_credential_name
from assay.sandbox import SandboxSpec, run_sandboxed
from assay.sandbox.environ import without_withheld_folders
from assay.sandbox.shield import make_undumpable

SECRET_LIST_ENV = "ASSAY_SECRET_ENV"
TAIL_BYTES = 4096
TAIL_LINES = 40

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
        "ASSAY_EVIDENCE_KEY_FILE",
        # Where the gate's key and the desks' state live is none of a row's business.
        "ASSAY_GATE_STATE",
        "ASSAY_STATE",
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
    """``base`` (default: ours) without the variables a row must not see (by name, or
    because the value holds a withheld one: a token copied under a harmless name), plus
    NO_COLOR.

    ``PATH`` is never dropped whole for holding a withheld value: only the folders that hold
    one are left out (``without_withheld_folders``). A row without a ``PATH`` would run
    whatever ``os.defpath`` finds, and the gate would fingerprint another interpreter than
    the one the desk used.
    """
    source = os.environ if base is None else base
    declared = _declared_secret_names(source)
    withheld = withheld_values(source)
    env = {
        k: v
        for k, v in source.items()
        if k in keep
        or k == "PATH"
        or not (is_secret_name(k) or k in declared or any(w in v for w in withheld))
    }
    if "PATH" in env and "PATH" not in keep:
        env["PATH"] = without_withheld_folders(env["PATH"], withheld)
    env.setdefault("NO_COLOR", "1")
    return env


def withheld_values(base: Mapping[str, str] | None = None, *, min_length: int = 8) -> list[str]:
    """The values of the variables rows do not get because they are secrets (a credential's
    name, or listed in ``$ASSAY_SECRET_ENV``), to scrub from anything recorded.

    Variables dropped for hygiene only (``PYTHONPATH``, ``GIT_DIR``, ``SSH_AUTH_SOCK``, the
    cloud prefixes) are not secrets: their values are ordinary paths that other variables
    rightly hold (``PATH`` holds the checkout ``PYTHONPATH`` names). Short values ("1",
    "true") are left out too: replacing them would mangle ordinary output.
    """
    source = os.environ if base is None else base
    declared = _declared_secret_names(source)
    return [
        v
        for k, v in source.items()
        if (is_credential_name(k) or k in declared)
        and k != SECRET_LIST_ENV
        and len(v) >= min_length
    ]


def shield_gate_process() -> bool:
    """Make this process non-dumpable (``assay.sandbox.shield.make_undumpable``), so rows
    cannot read its memory or environ even when they run unsandboxed."""
    return make_undumpable()


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


def gate_sandbox(*, unsandboxed: bool = False) -> SandboxSpec:
    """Where rows run: no network, the Python and Node toolchains readable; or, as the
    explicit ``--insecure-unsandboxed-rows`` choice, on the host with no isolation."""
    if unsandboxed:
        return SandboxSpec(network="host", isolation="off", toolchains=("python", "node"))
    return SandboxSpec(toolchains=("python", "node"))


def run_row(
    command: str,
    *,
    cwd: Path,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    tail_bytes: int = TAIL_BYTES,
    tail_lines: int = TAIL_LINES,
    sandbox: SandboxSpec | None = None,
    start: Sequence[str] = (),
) -> RowRun:
    """Run one row in ``cwd`` (in the sandbox) and return its exit, duration, digest and tail.

    ``start`` is a program of the gate's that prepares the row's sandbox and then becomes
    the row's command (``assay_gate_go_cache``). A row killed at its timeout reports
    ``timed_out`` and the signal exit (-9). A command that cannot start (no such program) is
    a failed row with exit 127, as a shell says.
    """
    result = run_sandboxed(
        [*start, *row_argv(command)],
        cwd=cwd,
        env=dict(row_environment() if env is None else env),
        spec=gate_sandbox() if sandbox is None else sandbox,
        timeout_s=timeout_s,
        max_output_bytes=2 * tail_bytes,
    )
    return RowRun(
        exit=result.exit,
        seconds=result.seconds,
        output_sha256=result.output_sha256,
        output_bytes=result.output_bytes,
        output_tail=result.last(tail_bytes, lines=tail_lines),
        timed_out=result.timed_out,
    )
