"""The structured verdict's rules, as a pure function of the reports and main's outcomes."""

from __future__ import annotations

from pathlib import Path

from assay.evidence.results import Baselines, Reports, judge

MAIN = {"t::a": "passed", "t::b": "failed", "t::c": "skipped"}


def _reports(tests: dict[str, str], *, tripwire: str = "failed", nonce: str = "n0nce") -> Reports:
    wire = {"outcome": tripwire, "message": f"the gate's tripwire {nonce} fails on purpose"}
    run = {"runner": "pytest", "complete": True, "tests": tests, "tripwire": wire}
    return Reports([run], ["pytest"], "n0nce")


def test_a_full_run_with_the_tripwire_reported_has_no_findings() -> None:
    reports = _reports({"t::a": "passed", "t::b": "passed", "t::c": "skipped", "t::new": "passed"})
    assert judge(runners=["pytest"], reports=reports, exit=0, baseline=MAIN) == []


def test_each_rule_names_the_test_and_the_rule() -> None:
    reports = _reports({"t::a": "skipped"}, tripwire="passed")
    findings = judge(runners=["pytest"], reports=reports, exit=0, baseline=MAIN)
    assert findings == [
        "ran 0 of main's 2 tests",
        "t::a: newly skipped (main: passed)",
        "t::b: deselected (main runs it)",
        "tripwire not reported: the runner's results cannot be trusted",
    ]


def test_a_failure_behind_exit_zero_and_a_forged_tripwire_message_are_findings() -> None:
    failing = _reports({"t::a": "passed", "t::b": "failed"})
    assert judge(runners=["pytest"], reports=failing, exit=0, baseline=MAIN) == [
        "t::b: reported failed, yet the row exited 0"
    ]
    forged = _reports({"t::a": "passed", "t::b": "passed"}, nonce="guessed")
    assert judge(runners=["pytest"], reports=forged, exit=0, baseline=MAIN) == [
        "tripwire not reported: the runner's results cannot be trusted"
    ]


def test_a_runner_that_started_and_never_reported_was_cut_short() -> None:
    reports = Reports([], ["unittest"], "n0nce")
    assert judge(runners=["unittest"], reports=reports, exit=0, baseline=MAIN) == [
        "unittest started but never reported: the run was cut short (ran 0 of main's 2 tests)"
    ]
    nothing = Reports([], [], "n0nce")
    assert judge(runners=["pytest"], reports=nothing, exit=0, baseline=None) == [
        "no report from pytest: the runner's results are unknown"
    ]


def test_go_and_cargo_reports_prove_their_end_without_a_tripwire_and_others_still_need_it() -> None:
    go = {"runner": "go", "complete": True, "tests": {"t::a": "passed", "t::b": "passed"}}
    cargo = {"runner": "cargo", "complete": True, "tests": {"c::x": "passed"}, "tripwire": {}}
    reports = Reports([go, cargo], ["go", "cargo"], "n0nce")
    assert judge(runners=["go", "cargo"], reports=reports, exit=0, baseline=MAIN) == []
    unwired = {"runner": "pytest", "complete": True, "tests": {}, "tripwire": {}}
    mixed = Reports([go, unwired], ["go", "pytest"], "n0nce")
    assert judge(runners=["go", "pytest"], reports=mixed, exit=0, baseline=MAIN) == [
        "tripwire not reported: the runner's results cannot be trusted"
    ]


def test_main_outcomes_are_kept_per_base_and_command(tmp_path: Path) -> None:
    store = Baselines(tmp_path / "baselines")
    assert store.get("b" * 40, "pytest") is None
    store.put("b" * 40, "pytest", MAIN)
    assert store.get("b" * 40, "pytest") == MAIN
    assert store.get("b" * 40, "pytest -x") is None
    assert store.get("c" * 40, "pytest") is None
