"""The gate's pytest plugin: each test's outcome, and the tripwire, as pytest reports them.

Loaded with ``-p assay_gate_pytest`` from the gate's own folder. It appends the tripwire
after every other plugin has selected and deselected (``trylast``), records each test's
final report (``pytest_runtest_logreport``, after every conftest and plugin had its say),
and, when the tripwire is the only failure, gives pytest back the exit status it would have
had without it.
"""

from __future__ import annotations

import unittest
from typing import Any

try:  # on the rows' import path, from the gate's own folder (how the gate loads it)
    import assay_gate_report as shared
except ModuleNotFoundError:  # imported as a module of the package (a walk of assay/)
    from assay.evidence.reporters import assay_gate_report as shared
import pytest

_outcomes: dict[str, str] = {}
_tripwire: dict[str, str] = {"outcome": "not run", "message": ""}


class Tripwire(pytest.Item):
    """A test that must fail, with a message only the gate knows."""

    def runtest(self) -> None:
        where = shared.take()
        # Through unittest's own assertion, as a unittest-style test would fail: a silenced
        # ``assertEqual`` silences the tripwire too.
        unittest.TestCase().assertEqual(shared.tripwire_message(where[1] if where else ""), "")

    def reportinfo(self) -> tuple[str, int, str]:
        return "assay-gate", 0, shared.TRIPWIRE


_WORKER_KEY = "assay_gate_report"
_worker = False


def pytest_configure(config: pytest.Config) -> None:
    global _worker
    workerinput = getattr(config, "workerinput", None)
    if isinstance(workerinput, dict):  # a pytest-xdist worker: the controller reports
        _worker = True
        value = workerinput.get(_WORKER_KEY)
        if isinstance(value, str):
            shared.adopt(value)  # so the worker collects the tripwire like the rest
        return
    if shared.take() is not None:
        shared.started("pytest")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: hand the report folder to each worker through its input, not its
    environment."""
    where = shared.take()
    if where is not None:
        node.workerinput[_WORKER_KEY] = "\n".join(where)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, items: list[pytest.Item]) -> None:
    if shared.take() is not None:
        items.append(Tripwire.from_parent(session, name=shared.TRIPWIRE))


def _outcome(report: pytest.TestReport) -> str:
    if hasattr(report, "wasxfail"):
        return "xfailed" if report.skipped else "xpassed"
    if report.when == "call":
        return report.outcome
    if report.failed:
        return "error"
    return "skipped" if report.skipped else ""


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    outcome = _outcome(report)
    if not outcome:
        return
    if report.nodeid.endswith(shared.TRIPWIRE) and report.location[0] == "assay-gate":
        if report.when == "call" or outcome != "passed":
            _tripwire["outcome"] = outcome
            _tripwire["message"] = str(report.longrepr or "")[-2000:]
        return
    settled = _outcomes.get(report.nodeid) in ("error", "failed")
    if not settled and (
        report.nodeid not in _outcomes or report.when == "call" or outcome == "error"
    ):
        _outcomes[report.nodeid] = outcome


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: Any) -> None:
    if _worker or shared.take() is None:
        return
    if _tripwire["outcome"] == "failed" and session.testsfailed > 0:
        session.testsfailed -= 1
        if session.testsfailed == 0 and int(session.exitstatus) == int(
            pytest.ExitCode.TESTS_FAILED
        ):
            session.exitstatus = (
                pytest.ExitCode.OK if _outcomes else pytest.ExitCode.NO_TESTS_COLLECTED
            )
        _hide_tripwire(session.config)
    shared.write("pytest", dict(_outcomes), dict(_tripwire), exitstatus=int(session.exitstatus))


def _hide_tripwire(config: pytest.Config) -> None:
    """Keep the tripwire out of the terminal's summary (it printed one ``F`` already)."""
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    stats = getattr(terminal, "stats", None)
    if isinstance(stats, dict) and "failed" in stats:
        stats["failed"] = [
            r for r in stats["failed"] if getattr(r, "location", ("",))[0] != "assay-gate"
        ]
        if not stats["failed"]:
            del stats["failed"]
