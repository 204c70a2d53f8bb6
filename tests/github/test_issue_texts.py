"""Attacks on issue briefs: rows rewritten after a writer made the issue a brief, and ids
taken from other issues.

An issue brief is the issue as it stood when a person with write permission made it one
(labelled it ``assay``, or commented ``/assay accept [DIGEST]``), recorded by the events job
and signed with the gate's key (``assay.github.pins``). The issue's author (read permission)
and a desk job's token (``issues: write``) can both edit the body after the desk's work
failed a row; the brief keeps the accepted rows, and the issue is told once. Everything
goes through the real CLI (``assay github events``, ``assay github briefs``) against the
fake GitHub.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import AssayRunner
from tests.github.fake_github import BOT, FakeGitHub

ROWS = "---\nverify:\n  - id: unit\n    run: python -m pytest -q\n---\nAdd median().\n"
CHEAT = "---\nverify:\n  - id: unit\n    run: 'true'\n---\nAdd median().\n"


def as_user(fake: FakeGitHub, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=fake.api_url,
        headers={"Authorization": f"Bearer {token}", "User-Agent": "a-person"},
        timeout=10,
    )


def github(run_assay: AssayRunner, env: dict[str, str], *args: str) -> dict[str, Any]:
    done = run_assay("github", *args, "--json", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def brief_rows(run_assay: AssayRunner, env: dict[str, str]) -> dict[str, Any]:
    listed = github(run_assay, env, "briefs")
    return {b["brief"]: (b["text"], [row["run"] for row in b["verify"]]) for b in listed["briefs"]}


def notes(fake: FakeGitHub, number: int) -> list[str]:
    return [
        c["body"]
        for c in fake.comments.values()
        if c["_issue"] == number and "assay:issue-text" in c["body"]
    ]


@pytest.fixture
def env(fake_github: FakeGitHub, tmp_path: Path) -> dict[str, str]:
    return {
        "GITHUB_API_URL": fake_github.api_url,
        "GITHUB_TOKEN": "ghs-bot",
        "ASSAY_STATE": str(tmp_path / "state"),
        "ASSAY_GITHUB_WRITE_SPACING": "0",
        "ASSAY_FORGE": f"github:{fake_github.slug}",
    }


@pytest.mark.slow
def test_rows_rewritten_by_the_author_or_the_desk_token_are_refused_and_reported(
    fake_github: FakeGitHub, run_assay: AssayRunner, env: dict[str, str]
) -> None:
    # A stranger's issue (read permission: its labels are dropped), labelled by a maintainer.
    with as_user(fake_github, "ghp-stranger") as gh:
        made = gh.post(
            f"/repos/{fake_github.slug}/issues",
            json={"title": "Add a median", "body": ROWS, "labels": ["assay"]},
        )
        number = int(made.json()["number"])
    assert fake_github.issues[number]["_labels"] == []
    brief = f"issue-{number}"
    with as_user(fake_github, "ghp-maintainer") as gh:
        gh.post(f"/repos/{fake_github.slug}/issues/{number}/labels", json={"labels": ["assay"]})
    label = fake_github.timeline[number][-1]["id"]
    assert github(run_assay, env, "events")["accepted"] == {str(number): f"label-{label}"}
    assert brief_rows(run_assay, env) == {brief: ("accepted", ["python -m pytest -q"])}

    # The desk's work failed the row; the author, then the desk job's own token, rewrite it.
    for token in ("ghp-stranger", "ghs-bot"):
        cheat = CHEAT.replace("Add", f"Add ({token})")
        with as_user(fake_github, token) as gh:
            edited = gh.patch(f"/repos/{fake_github.slug}/issues/{number}", json={"body": cheat})
            assert edited.status_code == 200, edited.text
        ran = github(run_assay, env, "events")
        assert ran["accepted"] == {} and ran["noted"] == [number]
    assert github(run_assay, env, "events")["noted"] == []  # told once per text
    assert len(notes(fake_github, number)) == 1  # one note, edited for the second text
    assert brief_rows(run_assay, env) == {brief: ("changed", ["python -m pytest -q"])}
    note = notes(fake_github, number)[-1]
    assert "/assay accept " in note and "not accepted" in note
    bot_notes = [c for c in fake_github.comments.values() if "assay:issue-text" in c["body"]]
    assert all(c["user"]["login"] == BOT for c in bot_notes)

    # Neither the author nor the bot can accept it; a maintainer can, by its digest.
    digest = note.split("/assay accept ")[1].split("`")[0]
    for user in ("stranger", BOT):
        fake_github.add_comment(number, f"/assay accept {digest}", user)
    refused = github(run_assay, env, "events")
    assert refused["accepted"] == {}
    assert sorted(i["actor"] for i in refused["ignored"]) == sorted(["stranger", BOT])
    fake_github.add_comment(number, f"/assay accept {digest}", "maintainer")
    assert list(github(run_assay, env, "events")["accepted"]) == [str(number)]
    assert brief_rows(run_assay, env) == {brief: ("accepted", ["true"])}


def test_an_id_is_bound_to_its_issue_and_a_collision_fails_the_newer_issue_only(
    fake_github: FakeGitHub, run_assay: AssayRunner, env: dict[str, str]
) -> None:
    with as_user(fake_github, "ghp-maintainer") as gh:
        for title, body in (
            ("Squatter", ROWS.replace("---\nverify:", "---\nid: issue-2\nverify:")),
            ("Its own", ROWS),
            ("Tidy", ROWS.replace("---\nverify:", "---\nid: tidy\nverify:")),
            ("Tidy again", ROWS.replace("---\nverify:", "---\nid: tidy\nverify:")),
        ):
            gh.post(
                f"/repos/{fake_github.slug}/issues",
                json={"title": title, "body": body, "labels": ["assay"]},
            )
    assert len(github(run_assay, env, "events")["accepted"]) == 4
    listed = github(run_assay, env, "briefs")
    assert [(b["brief"], b["issue"]) for b in listed["briefs"]] == [("issue-2", 2), ("tidy", 3)]
    errors = listed["errors"]
    assert [e for e in errors if e.startswith("issue #1:") and "names issue #2" in e], errors
    assert [e for e in errors if e.startswith("issue #4:") and "belongs to issue #3" in e]
    # Naming the squatter's id gets issue #2's brief; the squatter alone is exit 65.
    assert len(errors) == 2
