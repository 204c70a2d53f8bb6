"""Sweeps against a real embedded forge: dry runs, orphans, the waker, idempotence."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from assay.claims.store import ClaimStore
from assay.forge import open_forge
from assay.plumbing import ASSAY_IDENTITY, RefUpdate
from assay.sweep.engine import run_sweep
from assay.sweep.policy import WakerPolicy, load_policies
from tests.conftest import AssayRunner
from tests.forge_fixtures import put_on_main, wait_until
from tests.sweep.helpers import (
    brief_files,
    push_event,
    refs_of,
    start_worker,
    status_record,
    sweep_json,
    sweepers,
)


def _expired_claim(spec: str, brief: str) -> None:
    with open_forge(spec) as forge:
        store = ClaimStore(forge, skew_s=0)
        store.acquire(brief, "coder", lease_s=0.3)
        wait_until(lambda: store.status(store.get(brief)) == "expired", what="lease expiry")


def test_dry_run_plans_but_changes_nothing(
    forge_path: Path, tmp_path: Path, run_assay: AssayRunner
) -> None:
    spec = str(forge_path)
    put_on_main(spec, brief_files("a"))
    _expired_claim(spec, "a")
    policies = sweepers(tmp_path / "sweepers")
    before = refs_of(forge_path)
    planned = sweep_json(run_assay, "--dry-run", "--sweepers", str(policies), "--forge", spec)
    assert planned["dry_run"] is True
    assert [(a["action"], a["outcome"]) for a in planned["actions"]] == [("mark-stuck", "planned")]
    assert refs_of(forge_path) == before
    # The table form says the same without --json.
    table = run_assay("sweep", "--dry-run", "--sweepers", str(policies), "--forge", spec)
    assert table.returncode == 0 and "would do" in table.stdout and "mark-stuck" in table.stdout
    assert refs_of(forge_path) == before


def test_orphans_are_reported_not_deleted_and_deleted_only_with_fix(
    forge_path: Path, tmp_path: Path, run_assay: AssayRunner
) -> None:
    spec = str(forge_path)
    put_on_main(spec, brief_files("real"))
    with open_forge(spec) as forge:
        store = ClaimStore(forge)
        store.release(store.acquire("ghost", "coder", lease_s=60))  # a claim without a brief
        commit = forge.commit({"x.txt": b"x"}, parents=[], message="stray", author=ASSAY_IDENTITY)
        result = forge.push(
            [
                RefUpdate("refs/heads/assay/stray", commit),  # a branch with no brief or claim
                RefUpdate("refs/assay/reviews/gone", commit),  # a review whose branch is gone
            ]
        )
        assert result.ok
    policies = sweepers(tmp_path / "sweepers")
    orphans = ["refs/assay/claims/ghost", "refs/assay/reviews/gone", "refs/heads/assay/stray"]

    first = sweep_json(run_assay, "--sweepers", str(policies), "--forge", spec)
    assert sorted(a["ref"] for a in first["actions"]) == orphans
    assert {a["action"] for a in first["actions"]} == {"report-orphan"}
    after_first = refs_of(forge_path)
    assert all(ref in after_first for ref in orphans)  # reported, not deleted
    assert "refs/assay/sweeps/log" in after_first  # and the report is on the forge

    second = sweep_json(run_assay, "--sweepers", str(policies), "--forge", spec)
    assert second["actions"] == []
    assert refs_of(forge_path) == after_first  # idempotent: nothing reported twice

    fixed = sweep_json(run_assay, "--fix", "--sweepers", str(policies), "--forge", spec)
    assert sorted((a["ref"], a["outcome"]) for a in fixed["actions"]) == [
        (ref, "deleted") for ref in orphans
    ]
    remaining = refs_of(forge_path)
    assert not any(ref in remaining for ref in orphans)
    assert "refs/heads/main" in remaining
    table = run_assay("status", "--forge", spec)
    assert table.returncode == 0, table.stderr
    assert "real" in table.stdout and "queued" in table.stdout


class _Dispatcher:
    """Starts the test worker for a woken brief (what `assay desk run --once` does for a desk)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.started: list[subprocess.Popen[str]] = []

    def __call__(self, brief: str, desk: str, url: str, policy: Any) -> int:
        process = start_worker(url, brief, self.workdir / f"w{len(self.started)}", "--wait")
        self.started.append(process)
        return process.pid


def test_waiting_run_is_woken_once_its_approval_arrives_and_not_before(
    forge_path: Path, tmp_path: Path
) -> None:
    spec = str(forge_path)
    put_on_main(spec, brief_files("gate"))
    waiting = start_worker(spec, "gate", tmp_path / "first", "--wait")
    out, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 75, out + err  # suspended, holding no process

    waker = [WakerPolicy(kind="waker", name="waker")]
    dispatch = _Dispatcher(tmp_path)
    with open_forge(spec) as forge:
        assert ClaimStore(forge).get("gate").state == "waiting"  # type: ignore[union-attr]
        assert run_sweep(forge, waker, dispatcher=dispatch).actions == []
        push_event(spec, "gate", "signal", "steer-1")  # steering is not an approval
        assert run_sweep(forge, waker, dispatcher=dispatch).actions == []
        assert dispatch.started == []

        push_event(spec, "gate", "approve", "approval-1")
        report = run_sweep(forge, waker, dispatcher=dispatch)
        assert [(a.action, a.detail["event"]) for a in report.actions] == [("wake", "approval-1")]
        assert report.outcomes[0].startswith("dispatched pid ")
        [resumed] = dispatch.started
        out, err = resumed.communicate(timeout=120)
        assert resumed.returncode == 0, out + err
        record = ClaimStore(forge).get("gate")
        assert record is not None and record.state == "done"
        # Woken once: the approval is consumed, the claim is done, a new sweep does nothing.
        assert run_sweep(forge, waker, dispatcher=dispatch).actions == []
        assert len(dispatch.started) == 1
    status = status_record(spec, "gate")
    assert status is not None and status["state"] == "woken" and status["event"] == "approval-1"


def test_a_wake_already_dispatched_is_not_repeated(forge_path: Path, tmp_path: Path) -> None:
    spec = str(forge_path)
    put_on_main(spec, brief_files("slowstart"))
    waiting = start_worker(spec, "slowstart", tmp_path / "first", "--wait")
    assert waiting.wait(timeout=120) == 75
    waiting.communicate(timeout=30)
    push_event(spec, "slowstart", "approve", "ok-1")
    # dispatch: none, so no desk starts and the claim stays waiting, as when a dispatched
    # process is slow to start: the wake on record stops a second dispatch.
    policies = load_policies(sweepers(tmp_path / "sweepers"))
    with open_forge(spec) as forge:
        first = run_sweep(forge, policies, now=datetime.now(UTC))
        assert [(a.action, o) for a, o in zip(first.actions, first.outcomes, strict=True)] == [
            ("wake", "recorded (dispatch: none)")
        ]
        before = refs_of(forge_path)
        assert run_sweep(forge, policies).actions == []
        assert refs_of(forge_path) == before


class _Counted:
    """Counts one open forge's network calls by wrapping its methods (behaviour unchanged)."""

    def __init__(self, forge: Any) -> None:
        self.calls: list[str] = []
        for name in ("refresh", "fetch", "push", "ls_refs"):
            setattr(forge, name, self._wrap(name, getattr(forge, name)))

    def _wrap(self, name: str, method: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return method(*args, **kwargs)

        return counted


def test_a_sweep_reads_all_claims_in_one_fetch_and_acts_in_constant_pushes(
    forge_path: Path, tmp_path: Path
) -> None:
    spec = str(forge_path)
    briefs = [f"b{n}" for n in range(6)]
    put_on_main(spec, brief_files(*briefs))
    with open_forge(spec) as forge:
        store = ClaimStore(forge, skew_s=0)
        claims = [store.acquire(b, "coder", lease_s=0.3) for b in briefs]
        wait_until(
            lambda: all(store.status(store.get(c.brief)) == "expired" for c in claims),  # type: ignore[arg-type]
            what="every lease to expire",
        )
    policies = load_policies(sweepers(tmp_path / "sweepers"))
    with open_forge(spec) as forge:
        counted = _Counted(forge)
        # one read of the refs (``refresh``: the claims' objects are in the cache already,
        # so no git fetch follows it)
        dry = run_sweep(forge, policies, dry_run=True)
        assert len(dry.actions) == 6 and counted.calls == ["refresh"]
        counted.calls.clear()
        acted = run_sweep(forge, policies)
        assert acted.outcomes == ["done"] * 6
        # one read; one atomic push for all six claims, their six statuses and the sweep
        # log entry
        assert counted.calls == ["refresh", "push"]
        counted.calls.clear()
        assert run_sweep(forge, policies).actions == []
        assert counted.calls == ["refresh"]
    with open_forge(spec) as forge:
        assert {r.state for r in ClaimStore(forge).list()} == {"stuck"}
