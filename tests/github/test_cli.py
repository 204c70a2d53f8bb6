"""``assay github ...`` on the command line: JSON with REST counts, reports, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from assay.claims import ClaimStore
from assay.github.events import collect_events
from assay.github.forge import open_github_forge
from assay.github.init import starter_files
from assay.github.mirror import GitHubMirror
from tests.conftest import AssayRunner
from tests.github.fake_github import FakeGitHub

ISSUE = "---\nid: tidy\nverify:\n  - id: unit\n    run: python -m pytest -q\n---\nTidy up.\n"


def setup_waiting_brief(fake: FakeGitHub, tmp_path: Path) -> int:
    fake.seed_main({path: source.read_text() for path, source in starter_files().items()})
    with httpx.Client(
        base_url=fake.api_url,
        headers={"Authorization": "Bearer ghp-maintainer", "User-Agent": "person"},
    ) as gh:
        number = int(
            gh.post(
                "/repos/acme/widgets/issues",
                json={"title": "Tidy", "body": ISSUE, "labels": ["assay"]},
            ).json()["number"]
        )
    forge = open_github_forge("github:acme/widgets", cache_dir=tmp_path / "setup-cache")
    with forge:
        assert number in collect_events(forge).accepted  # the maintainer's label fixes the text
        store = ClaimStore(forge)
        claim = store.set_waiting(store.acquire("tidy", "example", lease_s=60), "approval")
        GitHubMirror(forge).claim("tidy", claim.record, issue=number)
    for user in ("stranger", "maintainer"):
        fake.add_comment(number, "/assay approve", user)
    # A second after the maintainer's label on GitHub (stamps are whole seconds): the
    # comments changed the issue after the last writer act its record has seen.
    fake.issues[number]["updated_at"] = "2099-01-01T00:00:00Z"
    return number


def test_events_command_honours_writers_reports_others_and_dispatches(
    fake_github: FakeGitHub,
    run_assay: AssayRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = {
        "GITHUB_API_URL": fake_github.api_url,
        "GITHUB_TOKEN": "ghs-bot",
        "ASSAY_STATE": str(tmp_path / "state"),
        "ASSAY_GITHUB_WRITE_SPACING": "0",
        "ASSAY_FORGE": "github:acme/widgets",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    setup_waiting_brief(fake_github, tmp_path)
    done = run_assay("github", "events", "--dispatch", "assay-desk.yml", "--json", env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [(e["kind"], e["actor"]) for e in report["appended"]] == [("approve", "maintainer")]
    assert [i["actor"] for i in report["ignored"]] == ["stranger"]
    assert "ignored" in done.stderr and "stranger" in done.stderr
    assert report["woken"] == ["tidy"]
    assert fake_github.dispatches == [
        {
            "workflow": "assay-desk.yml",
            "ref": "main",
            "inputs": {"desk": "example", "brief": "tidy"},
            "user": "github-actions[bot]",
        }
    ]
    # which brief each number is (open issues, open pull requests), comments list, the
    # issue's timeline (it changed since the label), two permission checks, the dispatch
    assert report["rest"]["charged"] == 7
    again = json.loads(run_assay("github", "events", "--json", env=env).stdout)
    # Read again or not (the cursor is inclusive), nothing is appended or checked twice.
    assert again["appended"] == [] and again["ignored"] == []
    assert again["rest"]["charged"] <= 1


def test_briefs_command_lists_issue_briefs_with_rest_counts(
    fake_github: FakeGitHub,
    run_assay: AssayRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GITHUB_API_URL", fake_github.api_url)
    monkeypatch.setenv("GITHUB_TOKEN", "ghs-bot")
    with httpx.Client(
        base_url=fake_github.api_url,
        headers={"Authorization": "Bearer ghp-maintainer", "User-Agent": "person"},
    ) as gh:
        gh.post(
            "/repos/acme/widgets/issues",
            json={"title": "Tidy", "body": ISSUE, "labels": ["assay"]},
        )
    env = {
        "GITHUB_API_URL": fake_github.api_url,
        "MY_TOKEN": "ghs-bot",
        "ASSAY_STATE": str(tmp_path / "state"),
    }
    with open_github_forge("github:acme/widgets", cache_dir=tmp_path / "events") as forge:
        collect_events(forge)  # the events job: the maintainer's label fixes the text
    briefs = ("github", "briefs", "--forge", "github:acme/widgets", "--token-env", "MY_TOKEN")
    done = run_assay(*briefs, "--json", env=env)
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert [(b["brief"], b["issue"]) for b in listed["briefs"]] == [("tidy", 1)]
    assert listed["rest"] == {
        "calls": 1,
        "charged": 1,
        "not_modified": 0,
        "retries": 0,
        "waited_s": 0.0,
        "writes": 0,
    }
    # A second process polls with the ETag the first one kept: a 304, nothing charged.
    again = run_assay(*briefs, "--json", env=env)
    second = json.loads(again.stdout)
    assert second["briefs"] == listed["briefs"]
    assert (second["rest"]["not_modified"], second["rest"]["charged"]) == (1, 0)


def test_bad_input_exits_65_naming_the_problem(run_assay: AssayRunner, tmp_path: Path) -> None:
    no_token = run_assay(
        "github", "briefs", "--forge", "github:acme/widgets", env={"GITHUB_TOKEN": ""}
    )
    assert no_token.returncode == 65 and "GITHUB_TOKEN" in no_token.stderr
    not_github = run_assay("github", "briefs", "--forge", str(tmp_path))
    assert not_github.returncode == 65 and "github:OWNER/REPO" in not_github.stderr
    bad_input = run_assay(
        "github",
        "dispatch",
        "x.yml",
        "--input",
        "novalue",
        "--forge",
        "github:a/b",
        env={"GITHUB_TOKEN": "t"},
    )
    assert bad_input.returncode == 65 and "KEY=VALUE" in bad_input.stderr
