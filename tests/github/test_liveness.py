"""On GitHub a desk in an Actions job is alive while its workflow run is in progress.

A claim taken inside a job names the job's workflow run (``GITHUB_RUN_ID``); a sweep asks
GitHub once which of the lapsed holders' runs are still in progress (one conditional list,
a 304 when nothing changed) and leaves those claims alone: the holder is alive by a signal
that costs no push, however long its renewals wait on the push budget.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from assay.claims import ClaimStore
from assay.forge import Identity, RefLog, open_forge
from assay.github.forge import GitHubForge
from assay.sweep.engine import SweepReport, run_sweep
from assay.sweep.policy import parse_policy
from tests.github.fake_github import FakeGitHub

DESK_WORKFLOW = ".github/workflows/assay-desk.yml"
AUTHOR = Identity("coder", "coder@example.invalid")
STUCK = [parse_policy({"kind": "stuck-claims", "skew_s": 0}, source="stuck-claims.yaml")]
HONEST = parse_policy({"kind": "honest-status", "skew_s": 0}, source="honest-status.yaml")


@pytest.fixture
def forge(
    fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[GitHubForge]:
    monkeypatch.setenv("GITHUB_API_URL", fake_github.api_url)
    monkeypatch.setenv("GITHUB_TOKEN", "ghs-bot")
    monkeypatch.setenv("ASSAY_GITHUB_WRITE_SPACING", "0")
    monkeypatch.delenv("ASSAY_GITHUB_GIT_URL", raising=False)
    monkeypatch.delenv("ASSAY_GITHUB_TOKEN_ENV", raising=False)
    fake_github.seed_main({"README.md": "widgets\n"})
    opened = open_forge("github:acme/widgets", cache_dir=tmp_path / "cache")
    assert isinstance(opened, GitHubForge)
    with opened:
        yield opened


def claim_in_job(
    forge: GitHubForge, monkeypatch: pytest.MonkeyPatch, brief: str, run: int | None
) -> None:
    """Take ``brief`` with a one-second lease, inside workflow run ``run`` (None: outside
    Actions)."""
    with monkeypatch.context() as job:
        if run is None:
            job.delenv("GITHUB_ACTIONS", raising=False)
            job.delenv("GITHUB_RUN_ID", raising=False)
        else:
            job.setenv("GITHUB_ACTIONS", "true")
            job.setenv("GITHUB_RUN_ID", str(run))
        ClaimStore(forge).acquire(brief, "coder", lease_s=1)


def say_working(forge: GitHubForge, brief: str) -> None:
    """The status record a desk leaves while it works on ``brief``."""
    RefLog.for_brief(forge, "status", brief).append(
        {"brief": brief, "state": "working", "note": "step 3"}, author=AUTHOR
    )


def runs_asked(fake: FakeGitHub) -> list[int]:
    return [c.status for c in fake.calls if c.path == "/repos/acme/widgets/actions/runs"]


def stuck(report: SweepReport) -> list[str]:
    return sorted(a.brief for a in report.actions if a.action == "mark-stuck")


def test_a_lapsed_claim_whose_run_is_in_progress_is_not_swept(
    fake_github: FakeGitHub, forge: GitHubForge, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = fake_github.add_workflow_run(DESK_WORKFLOW, conclusion=None)
    ended = fake_github.add_workflow_run(DESK_WORKFLOW, conclusion=None)
    fake_github.finish_workflow_run(ended, "cancelled")  # the runner was lost
    claim_in_job(forge, monkeypatch, "alive", running)
    claim_in_job(forge, monkeypatch, "gone", ended)
    claim_in_job(forge, monkeypatch, "local", None)
    record = json.loads(fake_github._git("show", "refs/assay/claims/alive:claim.json"))
    assert record["workflow_run"] == running
    assert "workflow_run" not in json.loads(
        fake_github._git("show", "refs/assay/claims/local:claim.json")
    )
    later = datetime.now(UTC) + timedelta(minutes=10)  # every lease lapsed long ago

    first = run_sweep(forge, STUCK, now=later)
    # The run still in progress keeps its claim; the one that ended, and the claim taken
    # outside Actions (judged by its lease alone), are swept.
    assert stuck(first) == ["gone", "local"]
    assert runs_asked(fake_github) == [200]  # one call for the whole sweep

    second = run_sweep(forge, STUCK, now=later)
    assert stuck(second) == []
    assert runs_asked(fake_github) == [200, 304]  # nothing changed: a free 304

    fake_github.finish_workflow_run(running, "success")  # the job ended without releasing
    third = run_sweep(forge, STUCK, now=later)
    assert stuck(third) == ["alive"]
    assert runs_asked(fake_github) == [200, 304, 200]


def test_a_working_status_stays_while_the_run_is_in_progress(
    fake_github: FakeGitHub, forge: GitHubForge, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = fake_github.add_workflow_run(DESK_WORKFLOW, conclusion=None)
    claim_in_job(forge, monkeypatch, "alive", running)
    claim_in_job(forge, monkeypatch, "local", None)
    say_working(forge, "alive")
    say_working(forge, "local")
    later = datetime.now(UTC) + timedelta(minutes=10)
    report = run_sweep(forge, [HONEST], now=later)
    assert [(a.action, a.brief) for a in report.actions] == [("correct-status", "local")]
    assert runs_asked(fake_github) == [200]


def test_a_sweep_with_no_lapsed_job_asks_github_nothing(
    fake_github: FakeGitHub, forge: GitHubForge, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = fake_github.add_workflow_run(DESK_WORKFLOW, conclusion=None)
    claim_in_job(forge, monkeypatch, "fresh", running)
    report = run_sweep(forge, STUCK, now=datetime.now(UTC))  # its lease is still running
    assert stuck(report) == [] and runs_asked(fake_github) == []
