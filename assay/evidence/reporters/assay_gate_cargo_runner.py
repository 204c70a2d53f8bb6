"""The gate's runner for ``cargo test``'s test binaries (``CARGO_TARGET_<TRIPLE>_RUNNER``).

Cargo starts each test binary it built as ``RUNNER target/debug/deps/NAME-HASH ARGS...``.
This program runs the binary twice, without the gate's report variable in its environment:

- ``--list`` with the row's own arguments: the tests this run must tell (Rust runs no code
  of the crate before ``main``, so the list is the harness's own);
- then the run itself with ``--logfile`` in the gate's report folder: libtest writes one line
  there per finished test (``ok NAME``, ``failed NAME``, ``ignored NAME``), apart from the
  stdout the code under test can print to. A listed test with no line is one the run never
  finished (``std::process::exit`` in the middle, an abort): the binary is in error.

libtest's JSON format (``-Z unstable-options --format json``, allowed on stable with
``RUSTC_BOOTSTRAP=1``) is not used: it is printed on that same stdout, so a crate that
writes the suite's ``ok`` line itself and exits forges it. The deprecation notice recent
libtest prints for ``--logfile`` is taken out of the binary's stderr.

The report has the shape of the other reporters' (``assay_gate_report``), one per binary,
with each test as ``<crate>::<name>``. There is no tripwire: code under test cannot reach
libtest's result reporting short of writing the log file itself.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from typing import IO

if __package__:  # imported as a module of the package (a walk of assay/)
    from assay.evidence.reporters import assay_gate_report as shared
else:  # run as a program from the gate's folder, beside the module it shares
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import assay_gate_report as shared  # type: ignore[no-redef]

RUNNER = "cargo"
DEPRECATED = b"warning: `--logfile` is deprecated"
_HASH = re.compile(r"-[0-9a-f]{16}$")
_COUNT = re.compile(r"^\d+ tests?, \d+ benchmarks?$")
_OUTCOMES = {"ok": "passed", "failed": "failed", "ignored": "skipped"}


def crate_of(binary: str) -> str:
    """``calc`` for ``target/debug/deps/calc-1ef8b3699685840a``."""
    return _HASH.sub("", os.path.basename(binary))


def listed(binary: str, args: list[str]) -> list[str] | None:
    """The tests the row's arguments select, as the harness lists them; None when the
    binary does not list them as libtest does (its count line closes the list)."""
    quiet = ("-q", "--quiet")  # which drops the count line
    done = subprocess.run(
        [binary, *(a for a in args if a not in quiet), "--list"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    names = []
    counted = False
    for line in done.stdout.decode(errors="replace").splitlines():
        name, sep, kind = line.rpartition(": ")
        if sep and kind == "test":
            names.append(name)
        elif _COUNT.match(line):
            counted = True
    return names if done.returncode == 0 and counted else None


def read_log(path: str) -> dict[str, str]:
    """Each finished test's outcome, from libtest's log file."""
    tests: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return tests
    for line in lines:
        word, _, name = line.partition(" ")
        if word in _OUTCOMES and name:
            tests[name] = _OUTCOMES[word]
    return tests


def _copy_stderr(source: IO[bytes], target: IO[bytes]) -> None:
    """Copy the binary's stderr, less the ``--logfile`` notice it may start with."""
    head = b""
    while len(head) < len(DEPRECATED):
        chunk = source.read1(4096)  # type: ignore[attr-defined]
        if not chunk:
            break
        head += chunk
        if not DEPRECATED.startswith(head[: len(DEPRECATED)]):
            break
    if head.startswith(DEPRECATED):
        head = head[len(DEPRECATED) :].lstrip(b"\n")
    target.write(head)
    target.flush()
    for chunk in iter(lambda: source.read1(4096), b""):  # type: ignore[attr-defined]
        target.write(chunk)
        target.flush()


def main(argv: list[str]) -> int:
    binary, args = argv[1], argv[2:]
    where = shared.take()  # and out of the environment the binary gets
    # The runner starts cargo run's programs and examples too (not in deps/), and cargo
    # bench's binaries (--bench): only test binaries are read.
    tests_binary = os.path.basename(os.path.dirname(binary)) == "deps" and "--bench" not in args
    if where is None or not tests_binary:
        os.execv(binary, [binary, *args])
    folder, _nonce = where
    shared.started(RUNNER)
    crate = crate_of(binary)
    expected = listed(binary, args)
    if expected is None:  # not libtest (harness = false): nothing here can be read
        code = subprocess.call([binary, *args])
        shared.write(
            RUNNER,
            {f"{crate}: not a libtest harness: its results cannot be read": "error"},
            {},
            crate=crate,
            exit=code,
        )
        return code if code >= 0 else 128 - code
    log = os.path.join(folder, f"{RUNNER}-{os.getpid()}-{os.urandom(8).hex()}.log")
    child = subprocess.Popen([binary, "--logfile", log, *args], stderr=subprocess.PIPE)
    assert child.stderr is not None
    copier = threading.Thread(target=_copy_stderr, args=(child.stderr, sys.stderr.buffer))
    copier.start()
    code = child.wait()
    copier.join()
    found = read_log(log)
    tests = {f"{crate}::{name}": outcome for name, outcome in found.items()}
    unfinished = [name for name in expected if name not in found]
    for name in unfinished:
        tests[f"{crate}::{name}"] = "error"
    if unfinished:
        tests[f"{crate}: the test binary ended before its tests did"] = "error"
    shared.write(RUNNER, tests, {}, crate=crate, exit=code, listed=len(expected))
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
