"""The gate's runner for ``go test``'s test binaries (``-exec`` in ``GOFLAGS``).

``go test`` builds one test binary per package and, with ``-exec PROG``, starts each as
``PROG pkg.test FLAGS...`` in the package's folder. This program runs the binary itself:

- with ``-test.v=true`` (unless the row asked for a ``-test.v`` of its own), so the binary
  prints each test's status line, read here as it passes through to ``go test``;
- with ``-test.memprofile`` pointing into the gate's report folder: the ``testing`` package
  writes that file only once ``M.Run`` has run every test, so a binary that ended before
  (``os.Exit(0)`` in an ``init``, ``syscall.Exit`` in a test) is told apart from one that
  finished, whatever it printed;
- with ``-test.run`` and ``-test.short`` set on its command line, so code under test that set
  them from an ``init`` (``testing.Init(); flag.Set(...)``) cannot deselect main's tests;
- without the gate's report variable in its environment.

The report has the shape of the other reporters' (``assay_gate_report``), one per binary,
with each test as ``<import path>::<name>``. There is no tripwire: code outside a
``_test.go`` file cannot patch the ``testing`` package; the end of ``M.Run`` stands in for it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import IO

if __package__:  # imported as a module of the package (a walk of assay/)
    from assay.evidence.reporters import assay_gate_report as shared
else:  # run as a program from the gate's folder, beside the module it shares
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import assay_gate_report as shared  # type: ignore[no-redef]

RUNNER = "go"
# testing's status lines; Go 1.20 and later frame them with ^V under -test.v=test2json
# (a row that says -json), and then an unframed line is only printed text.
_LINE = (
    rb"(?:    )*(?:=== RUN   (?P<run>\S.*)|--- (?P<result>PASS|FAIL|SKIP): "
    rb"(?P<name>\S.*?)(?: \([0-9.]+s\))?)\r?$"
)
_STATUS = re.compile(rb"^" + _LINE)
_FRAMED = re.compile(rb"^\x16" + _LINE)
FRAMING = "-test.v=test2json"
_OUTCOMES = {b"PASS": "passed", b"FAIL": "failed", b"SKIP": "skipped"}
_RANK = {"running": 0, "passed": 1, "skipped": 2, "failed": 3}


def import_path(folder: str) -> str:
    """The package's import path: the nearest ``go.mod``'s module plus the folder under it."""
    here = os.path.abspath(folder)
    probe = here
    while True:
        mod = os.path.join(probe, "go.mod")
        if os.path.isfile(mod):
            with open(mod, encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    words = line.split()
                    if len(words) >= 2 and words[0] == "module":
                        module = words[1].strip("\"'`")
                        rel = os.path.relpath(here, probe)
                        return module if rel == "." else f"{module}/{rel}"
            break
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    return os.path.basename(here) or "."


def _has(args: list[str], flag: str) -> bool:
    return any(a == flag or a.startswith(f"{flag}=") for a in args)


def read_status(stream: IO[bytes], out: IO[bytes], package: str, *, framed: bool) -> dict[str, str]:
    """Copy the binary's stdout to ``out`` line by line, and each test's outcome in it."""
    tests: dict[str, str] = {}
    status = _FRAMED if framed else _STATUS
    for line in iter(stream.readline, b""):
        out.write(line)
        out.flush()
        found = status.match(line.rstrip(b"\n"))
        if found is None:
            continue
        if found["run"] is not None:
            tests.setdefault(f"{package}::{found['run'].decode(errors='replace')}", "running")
            continue
        test = f"{package}::{found['name'].decode(errors='replace')}"
        outcome = _OUTCOMES[found["result"]]
        # The worst line told wins (a PASS printed after testing's SKIP or FAIL is not it).
        if _RANK[outcome] >= _RANK.get(tests.get(test, "running"), 0):
            tests[test] = outcome
    return {t: ("error" if o == "running" else o) for t, o in tests.items()}


def main(argv: list[str]) -> int:
    binary, args = argv[1], argv[2:]
    where = shared.take()  # and out of the environment the binary gets
    # -exec starts go run's programs too: only go test's binaries (pkg.test) are read.
    if where is None or not binary.endswith(".test"):
        os.execv(binary, [binary, *args])
    folder, _nonce = where
    shared.started(RUNNER)
    package = import_path(os.getcwd())
    end = os.path.join(folder, f"{RUNNER}-{os.getpid()}-{os.urandom(8).hex()}.end")
    # Ours first: the row's own flags after them still win, and a positional argument
    # (after -args) cannot hide them from testing's flag parsing.
    ours = [f"-test.memprofile={end}"]
    for flag, value in (("-test.run", ""), ("-test.short", "false"), ("-test.v", "true")):
        if not _has(args, flag):
            ours.append(f"{flag}={value}")
    child = subprocess.Popen([binary, *ours, *args], stdout=subprocess.PIPE)
    assert child.stdout is not None
    tests = read_status(child.stdout, sys.stdout.buffer, package, framed=FRAMING in args)
    code = child.wait()
    finished = os.path.exists(end)
    if not finished:
        tests[f"{package}: the test binary ended before its tests did"] = "error"
    shared.write(RUNNER, tests, {}, package=package, exit=code, finished=finished)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
