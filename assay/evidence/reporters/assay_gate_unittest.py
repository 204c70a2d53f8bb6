"""The gate's unittest reporter: ``python -m unittest`` run with the gate's result class.

The gate's ``sitecustomize`` calls ``install()`` in a process started as ``python -m
unittest``. The program's runner becomes one whose result records every test it starts and,
when the run stops, reads each outcome from the standard result lists (``failures``,
``errors``, ``skipped``, ...): code that patches ``unittest.TestResult.addFailure`` or
``TestCase.assertEqual`` silences the tripwire too. The tripwire, a test appended to the
suite, is then taken out of those lists, so the exit status is the real tests' own.
"""

from __future__ import annotations

import unittest
from typing import Any

try:  # on the rows' import path, from the gate's own folder (how the gate loads it)
    import assay_gate_report as shared
except ModuleNotFoundError:  # imported as a module of the package (a walk of assay/)
    from assay.evidence.reporters import assay_gate_report as shared


class Tripwire(unittest.TestCase):
    """A test that must fail, with a message only the gate knows."""

    nonce = ""

    def runTest(self) -> None:
        self.assertEqual(shared.tripwire_message(self.nonce), "")


class GateResult(unittest.TextTestResult):
    """A text result that remembers every test it started, in order."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.started_ids: list[str] = []

    def startTest(self, test: unittest.TestCase) -> None:
        self.started_ids.append(test.id())
        super().startTest(test)

    def stopTestRun(self) -> None:
        super().stopTestRun()
        report(self)


def report(result: GateResult) -> None:
    """Write the report from the standard lists, then drop the tripwire from them."""
    outcomes = {test_id: "passed" for test_id in result.started_ids}
    tripwire = {"outcome": "not run", "message": ""}
    lists = [
        ("failed", result.failures),
        ("error", result.errors),
        ("skipped", result.skipped),
        ("xfailed", result.expectedFailures),
        ("xpassed", [(t, "") for t in result.unexpectedSuccesses]),
    ]
    for outcome, pairs in lists:
        for test, detail in pairs:
            if isinstance(test, Tripwire):
                tripwire = {"outcome": outcome, "message": str(detail)[-2000:]}
            elif hasattr(test, "id"):
                outcomes[test.id()] = outcome
    for test_id in result.started_ids:
        if test_id.endswith(".Tripwire.runTest") and tripwire["outcome"] == "not run":
            tripwire["outcome"] = "passed"
        if test_id.endswith(".Tripwire.runTest"):
            outcomes.pop(test_id, None)
    shared.write("unittest", outcomes, tripwire)
    result.failures[:] = [p for p in result.failures if not isinstance(p[0], Tripwire)]
    if tripwire["outcome"] == "failed":
        result.testsRun -= 1


class GateRunner(unittest.TextTestRunner):
    resultclass = GateResult


_run_tests = unittest.TestProgram.runTests


def _runs_with_the_gate(program: Any) -> None:
    where = shared.take()
    if where is not None and program.test is not None:
        Tripwire.nonce = where[1]
        program.test = unittest.TestSuite([program.test, Tripwire()])
        if program.testRunner in (None, unittest.TextTestRunner):
            program.testRunner = GateRunner
    _run_tests(program)


def install() -> None:
    """Run ``unittest.main`` through the gate's runner (called once, by sitecustomize)."""
    if shared.take() is None:
        return
    shared.started("unittest")
    unittest.TestProgram.runTests = _runs_with_the_gate  # type: ignore[method-assign,assignment]
