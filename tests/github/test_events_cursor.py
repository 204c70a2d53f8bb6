"""``assay github events`` reads from a cursor, not a window, and checks each refusal once.

The attacks: a hundred comments after a maintainer's approval pushed it out of the newest-100
window; sixty strangers' ``/assay approve`` comments cost sixty permission checks on every
run (a rate-limit denial of service); ``/assay approve-not-really`` was read as ``approve``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

import assay.refs as refs
from assay.claims import ClaimStore
from assay.forge import Identity, RefLog
from assay.github.events import CURSOR_KIND, collect_events, parse_command
from assay.github.forge import open_github_forge
from assay.github.init import starter_files
from assay.github.mirror import GitHubMirror
from tests.conftest import AssayRunner
from tests.github.fake_github import BOT, FakeGitHub

ISSUE = "---\nid: tidy\nverify:\n  - id: unit\n    run: python -m pytest -q\n---\nTidy up.\n"
STAMP = "2026-12-03T10:00:00Z"


@pytest.fixture
def env(fake_github: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    values = {
        "GITHUB_API_URL": fake_github.api_url,
        "GITHUB_TOKEN": "ghs-bot",
        "ASSAY_STATE": str(tmp_path / "state"),
        "ASSAY_GITHUB_WRITE_SPACING": "0",
        "ASSAY_FORGE": f"github:{fake_github.slug}",
    }
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    return values


def waiting_brief(fake: FakeGitHub, tmp_path: Path) -> int:
    """Issue ``tidy``, claimed and waiting for approval, its claim mirrored on the issue."""
    fake.seed_main({path: source.read_text() for path, source in starter_files().items()})
    with httpx.Client(
        base_url=fake.api_url,
        headers={"Authorization": "Bearer ghp-maintainer", "User-Agent": "person"},
    ) as gh:
        made = gh.post(
            f"/repos/{fake.slug}/issues", json={"title": "Tidy", "body": ISSUE, "labels": ["assay"]}
        )
        number = int(made.json()["number"])
    with open_github_forge(f"github:{fake.slug}", cache_dir=tmp_path / "setup") as forge:
        assert number in collect_events(forge).accepted  # the maintainer's label fixes the text
        store = ClaimStore(forge)
        claim = store.set_waiting(store.acquire("tidy", "example", lease_s=60), "approval")
        GitHubMirror(forge).claim("tidy", claim.record, issue=number)
    fake.calls.clear()  # what the tests count is what the runs below do
    return number


def events(run_assay: AssayRunner, env: dict[str, str]) -> dict[str, Any]:
    done = run_assay("github", "events", "--json", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def permission_checks(fake: FakeGitHub) -> int:
    return sum(1 for call in fake.calls if call.path.endswith("/permission"))


def test_an_approval_followed_by_a_hundred_comments_is_kept(
    fake_github: FakeGitHub, run_assay: AssayRunner, env: dict[str, str], tmp_path: Path
) -> None:
    number = waiting_brief(fake_github, tmp_path)
    approval = fake_github.add_comment(number, "/assay approve", "maintainer")
    for index in range(100):
        fake_github.add_comment(number, f"chatter {index}", "stranger")
    report = events(run_assay, env)
    assert [(e["kind"], e["id"]) for e in report["appended"]] == [
        ("approve", f"github-comment-{approval['id']}")
    ]
    # The cursor is a record on the forge: the next run reads only what came after it.
    assert fake_github.ref(refs.GITHUB_EVENTS_CURSOR) is not None
    later = fake_github.add_comment(number, "/assay steer use the stats module", "maintainer")
    later["updated_at"] = later["created_at"] = "2099-01-01T00:00:00Z"
    again = events(run_assay, env)
    assert [e["id"] for e in again["appended"]] == [f"github-comment-{later['id']}"]
    assert again["since"] == "2099-01-01T00:00:00Z"


def test_sixty_strangers_are_checked_once_across_two_runs(
    fake_github: FakeGitHub, run_assay: AssayRunner, env: dict[str, str], tmp_path: Path
) -> None:
    number = waiting_brief(fake_github, tmp_path)
    strangers = [f"stranger-{index}" for index in range(60)]
    for login in strangers:
        fake_github.permissions[login] = "read"
        fake_github.add_comment(number, "/assay approve", login)
    # Every comment at one instant: GitHub's since is inclusive, so the second run reads
    # every one of them again.
    for comment in fake_github.comments.values():
        comment["updated_at"] = comment["created_at"] = STAMP
    first = events(run_assay, env)
    assert sorted(i["actor"] for i in first["ignored"]) == sorted(strangers)
    assert permission_checks(fake_github) == 60
    second = events(run_assay, env)
    assert second["ignored"] == [] and second["appended"] == []
    assert len(second["remembered"]) == 60
    assert permission_checks(fake_github) == 60
    # An edit is a new stamp: that comment alone is checked again.
    edited = next(c for c in fake_github.comments.values() if c["user"]["login"] == strangers[0])
    edited["updated_at"] = "2026-12-03T10:00:01Z"
    third = events(run_assay, env)
    assert [i["actor"] for i in third["ignored"]] == [strangers[0]]
    assert permission_checks(fake_github) == 61


def test_a_command_must_end_at_a_word_boundary(
    fake_github: FakeGitHub, run_assay: AssayRunner, env: dict[str, str], tmp_path: Path
) -> None:
    number = waiting_brief(fake_github, tmp_path)
    for body in ("/assay approve-not-really", "/assay approved", "/assay cancel_all"):
        fake_github.add_comment(number, body, "maintainer")
    report = events(run_assay, env)
    assert report["appended"] == []
    assert parse_command("/assay approve-not-really") is None
    assert parse_command("/assay approve.") == ("approve", ".")
    assert parse_command("/assay approve ship it") == ("approve", "ship it")


def test_a_bots_command_is_never_honoured(
    fake_github: FakeGitHub, run_assay: AssayRunner, env: dict[str, str], tmp_path: Path
) -> None:
    """Desks act as github-actions[bot], which has write permission on GitHub."""
    number = waiting_brief(fake_github, tmp_path)
    fake_github.add_comment(number, "/assay approve", BOT)
    report = events(run_assay, env)
    assert report["appended"] == []
    assert [i["actor"] for i in report["ignored"]] == [BOT]
    assert permission_checks(fake_github) == 0


def test_a_comment_listed_late_behind_the_cursor_is_still_read(
    fake_github: FakeGitHub, run_assay: AssayRunner, env: dict[str, str], tmp_path: Path
) -> None:
    """GitHub may list a comment after a newer one was read: the read starts a minute back."""
    number = waiting_brief(fake_github, tmp_path)
    for comment in fake_github.comments.values():
        comment["updated_at"] = comment["created_at"] = STAMP
    newer = fake_github.add_comment(number, "looks fine", "maintainer")
    newer["updated_at"] = newer["created_at"] = "2026-12-03T10:00:30Z"
    assert events(run_assay, env)["since"] == "2026-12-03T10:00:30Z"
    late = fake_github.add_comment(number, "/assay approve", "maintainer")
    late["updated_at"] = late["created_at"] = "2026-12-03T10:00:10Z"
    report = events(run_assay, env)
    assert [e["id"] for e in report["appended"]] == [f"github-comment-{late['id']}"]
    assert report["since"] == "2026-12-03T10:00:30Z"


def test_a_cursor_the_job_did_not_sign_is_not_taken(
    fake_github: FakeGitHub, run_assay: AssayRunner, env: dict[str, str], tmp_path: Path
) -> None:
    """A desk job moves ``since`` past a maintainer's ``/assay reject`` and lists the
    comment among the refused: the events job reads everything again and honours it."""
    number = waiting_brief(fake_github, tmp_path)
    assert events(run_assay, env)["restarted"] is None
    reject = fake_github.add_comment(number, "/assay reject not this way", "maintainer")
    with open_github_forge(f"github:{fake_github.slug}", cache_dir=tmp_path / "desk") as forge:
        RefLog(forge, refs.GITHUB_EVENTS_CURSOR, kind=CURSOR_KIND).append(
            {
                "since": "2099-01-01T00:00:00Z",
                "ignored": {f"github-comment-{reject['id']}": reject["updated_at"]},
                "sig": "ed25519:forged:AAAA",
            },
            author=Identity("github-actions[bot]", "bot@example.invalid"),
        )
    report = events(run_assay, env)
    assert report["restarted"] is not None and "not signed" in report["restarted"]
    assert [e["id"] for e in report["appended"]] == [f"github-comment-{reject['id']}"]
    assert report["since"] != "2099-01-01T00:00:00Z"
    again = events(run_assay, env)  # the job's own signed cursor is taken again
    assert again["restarted"] is None and again["appended"] == []
