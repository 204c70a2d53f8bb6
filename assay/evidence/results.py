"""Results read from the runner, checked against main: the structured verdict of one row.

An exit code can be forged by the code under test (``os._exit(0)``, a patched
``assertEqual``). For a row that runs pytest, unittest, ``node --test``, jest, vitest,
``go test`` or ``cargo test``, the gate also reads the runner's own report
(``assay.evidence.reporters``, loaded from the gate's folder, writing into a folder with a
random name outside the tree) and the row passes only with all of:

- exit 0 (as before);
- a complete report from each runner the row starts (one that started and wrote nothing
  was cut short: ``os._exit`` at import, a crash);
- no test reported failed or in error;
- every test main runs at the brief's base (measured once per base and command, kept in
  the gate's state folder) ran again: none deselected, newly skipped or newly xfailed
  ("ran 0 of main's 12 tests");
- the tripwire, a test the reporter adds that fails with a random message, reported as
  exactly that failure ("tripwire not reported: the runner's results cannot be trusted");
  for go and cargo, proof in the report that each test binary reached its end instead.

``node --test`` runs each test file in a process of its own: a file whose process ended
before its natural end (an explicit exit, a kill) is a test in error, and the tripwire must
be told by every file's process. jest and vitest run each test file in a worker: the
gate's tripwire is a test in every file, run after the file's own, and the report is
written in the runner's own process once the run is over (jest's results processor,
vitest's reporter), so a run cut short leaves none. ``go test`` starts each package's test
binary through the gate's program (``-exec`` in ``GOFLAGS``), which reads its status lines
and knows from a file ``testing`` writes only at the end of ``M.Run`` whether the binary
finished; one that did not is a test in error (Go has no tripwire: see the program's
docstring). ``cargo test`` runs each test binary through the gate's runner, which lists the
binary's tests and reads each outcome from libtest's log file; a listed test with no
outcome there is one the run never finished. A row whose runners the gate does not read
(``make`` alone, a script, ``bun test``) is judged by its exit code and marked
``unstructured``.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from assay.evidence.reporters import REPORT_ENV

STRUCTURED = ("pytest", "unittest", "node:test", "jest", "vitest", "go", "cargo")
# Runners whose reports prove the run's end another way than the tripwire (go: the end of
# testing's M.Run, told by the profile it writes only then; cargo: a line in libtest's log
# file for every test the harness lists).
UNTRIPPED = ("go", "cargo")
PYTEST_PLUGIN = "assay_gate_pytest"
NODE_REPORTER = "assay_gate_node.mjs"
NODE_CHILD = "assay_gate_node_child.mjs"
JS_RUNNERS = "assay_gate_js.cjs"  # jest's and vitest's: acts only in their own processes
GO_EXEC = "assay_gate_go_exec"
GO_CACHE = "assay_gate_go_cache"  # a go row's start: its own copy of main's build cache
CARGO_RUNNER = "assay_gate_cargo_runner"
# The host triples cargo may build for here (its runner variable is named by the triple).
_CARGO_TRIPLES = tuple(
    f"{platform.machine()}-unknown-linux-{libc}".upper().replace("-", "_")
    for libc in ("gnu", "musl")
)
BASELINE_VERSION = 1
MAX_FINDINGS = 12
_SKIPPED = ("skipped",)
# unittest's stand-in for a module it could not import: not a test main runs.
_LOADER_FAILURES = ("unittest.loader._FailedTest.", "unittest.loader.ModuleImportFailure.")
_NOT_RUN = ("skipped", "xfailed")
_MAX_REPORT_BYTES = 64 * 1024 * 1024


def structured_runners(runners: Sequence[str]) -> tuple[str, ...]:
    """The runners of a row whose results the gate reads."""
    return tuple(r for r in STRUCTURED if r in runners)


@dataclass(frozen=True)
class Reports:
    """What the reporters wrote for one row run."""

    runs: list[dict[str, object]] = field(default_factory=list)
    started: list[str] = field(default_factory=list)  # runners that marked their start
    nonce: str = ""

    def tests(self) -> dict[str, str]:
        """Each test's outcome over every report (a failure anywhere wins)."""
        found: dict[str, str] = {}
        for run in self.runs:
            tests = run.get("tests")
            if not isinstance(tests, dict):
                continue
            for name, outcome in tests.items():
                if (
                    isinstance(name, str)
                    and isinstance(outcome, str)
                    and found.get(name) not in ("failed", "error")
                ):
                    found[name] = outcome
        return found


@dataclass(frozen=True)
class ReportFolder:
    """A gate-owned folder, with a name the row learns only from its environment."""

    path: Path
    nonce: str

    @classmethod
    def make(cls, root: Path) -> ReportFolder:
        path = root / secrets.token_hex(16)
        path.mkdir(mode=0o700)
        return cls(path, secrets.token_hex(16))

    def environ(self, env: Mapping[str, str], site: Path) -> dict[str, str]:
        """``env`` with the reporters in ``site`` switched on: pytest's plugin, unittest's
        runner, for ``node --test`` the gate's reporter beside node's own output and its
        module in every test file's process, the module that joins the gate to jest's and
        vitest's runs, and the programs go and cargo start test binaries through."""
        more = dict(env)
        more[REPORT_ENV] = f"{self.path}\n{self.nonce}"
        more["PYTEST_ADDOPTS"] = f"-p {PYTEST_PLUGIN} {env.get('PYTEST_ADDOPTS', '')}".strip()
        node = (
            f"--test-reporter={site / NODE_REPORTER} --test-reporter-destination=/dev/null "
            "--test-reporter=spec --test-reporter-destination=stdout "
            f"--import={site / NODE_CHILD} --require={site / JS_RUNNERS}"
        )
        more["NODE_OPTIONS"] = f"{node} {env.get('NODE_OPTIONS', '')}".strip()
        # -count=1: a result go test kept from an earlier run would run no binary to read.
        go = f"-count=1 -exec={site / GO_EXEC}"
        more["GOFLAGS"] = f"{go} {env.get('GOFLAGS', '')}".strip()
        for triple in _CARGO_TRIPLES:
            more[f"CARGO_TARGET_{triple}_RUNNER"] = str(site / CARGO_RUNNER)
        return more

    def read(self) -> Reports:
        runs: list[dict[str, object]] = []
        started: list[str] = []
        for entry in sorted(self.path.iterdir()):
            name = entry.name
            if name.endswith(".started"):
                started.append(name.split("-", 1)[0])
            elif name.endswith(".json") and entry.is_file():
                if entry.stat().st_size > _MAX_REPORT_BYTES:
                    continue
                try:
                    data = json.loads(entry.read_text(encoding="utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError):
                    continue
                if (
                    isinstance(data, dict)
                    and data.get("complete") is True
                    and data.get("nonce") == self.nonce
                ):
                    runs.append(data)
        return Reports(runs, started, self.nonce)


def judge(
    *, runners: Sequence[str], reports: Reports, exit: int, baseline: Mapping[str, str] | None
) -> list[str]:
    """The findings that fail a row whose ``runners`` the gate reads (empty: it may pass)."""
    findings: list[str] = []
    kinds = {str(run.get("runner")) for run in reports.runs}
    main_run = sorted(
        t
        for t, o in (baseline or {}).items()
        if o not in _SKIPPED and not t.startswith(_LOADER_FAILURES)
    )
    tests = reports.tests()
    ran = [t for t in main_run if tests.get(t) not in (None, *_SKIPPED)]
    of_main = f" (ran {len(ran)} of main's {len(main_run)} tests)" if main_run else ""
    for runner in runners:
        if runner in kinds:
            continue
        if runner in reports.started:
            findings.append(f"{runner} started but never reported: the run was cut short{of_main}")
        else:
            findings.append(f"no report from {runner}: the runner's results are unknown{of_main}")
    if len(findings) == len(runners) and runners:
        return findings  # nothing was reported: there is nothing more to read
    failed = sorted(t for t, o in tests.items() if o in ("failed", "error"))
    if exit == 0 and failed:
        findings += [f"{t}: reported {tests[t]}, yet the row exited 0" for t in failed]
    if len(ran) < len(main_run):
        findings.append(f"ran {len(ran)} of main's {len(main_run)} tests")
    for name in main_run:
        outcome = tests.get(name)
        before = (baseline or {}).get(name)
        if outcome is None:
            findings.append(f"{name}: deselected (main runs it)")
        elif outcome in _NOT_RUN and before != outcome:
            findings.append(f"{name}: newly {outcome} (main: {before})")
    if not failed and not _tripwire_reported(reports):
        findings.append("tripwire not reported: the runner's results cannot be trusted")
    if len(findings) > MAX_FINDINGS:
        findings = [*findings[: MAX_FINDINGS - 1], f"and {len(findings) - MAX_FINDINGS + 1} more"]
    return findings


def _tripwire_reported(reports: Reports) -> bool:
    """Whether every report that carries a tripwire shows it failing with the gate's own
    message (a runner in ``UNTRIPPED`` proves its end in its report instead)."""
    if not reports.runs:
        return False
    for run in reports.runs:
        if run.get("runner") in UNTRIPPED:
            continue
        wire = run.get("tripwire")
        if not isinstance(wire, dict) or wire.get("outcome") != "failed":
            return False
        if reports.nonce not in str(wire.get("message", "")):
            return False
    return True


class Baselines:
    """Main's test outcomes per (base commit, row command), kept in the gate's state folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, base: str, command: str) -> Path:
        digest = hashlib.sha256(command.encode()).hexdigest()[:24]
        return self.folder / f"{base}-{digest}.json"

    def get(self, base: str, command: str) -> dict[str, str] | None:
        path = self._path(base, command)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            return None
        tests = data.get("tests") if isinstance(data, dict) else None
        if data.get("v") != BASELINE_VERSION or not isinstance(tests, dict):
            return None
        return {str(k): str(v) for k, v in tests.items()}

    def put(self, base: str, command: str, tests: Mapping[str, str]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self._path(base, command)
        partial = path.with_suffix(f".{os.getpid()}.part")
        body = {"v": BASELINE_VERSION, "base": base, "command": command, "tests": dict(tests)}
        partial.write_text(json.dumps(body, sort_keys=True), encoding="utf-8")
        os.replace(partial, path)
