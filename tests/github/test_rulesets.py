"""The ruleset ``assay init`` prints, as the fake GitHub enforces it: what it stops on its
own, and what it leaves to Assay's gate.

GitHub's rulesets protect branches, not custom refs. The one ``assay init`` prints keeps
``main`` from being deleted or rewound and lets a change land only with a successful
``assay/evidence`` check from the GitHub Actions app, on a push and on a pull request's
merge alike. These are the attacks a desk job's token (``contents: write``) or another app
installed on the repository would try around Assay, against the fake with that ruleset.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from assay.github.init import MAIN_RULESET
from tests.github.fake_github import FakeGitHub


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeGitHub]:
    with FakeGitHub(tmp_path / "github", rulesets=[MAIN_RULESET]) as github:
        github.seed_main({"README.md": "widgets\n"})
        yield github
    assert not github.violations, "\n".join(github.violations)


def push(
    fake: FakeGitHub, tmp_path: Path, token: str, *refspecs: str
) -> subprocess.CompletedProcess[str]:
    """``git push`` from a clone of the fake's bare repository with ``token``."""
    header = f"http.extraHeader=Authorization: Bearer {token}"
    return subprocess.run(
        ["git", "-C", str(tmp_path / "clone"), "-c", header, "push", "--porcelain",
         fake.git_url, *refspecs],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def commit_on_main(fake: FakeGitHub, tmp_path: Path, name: str) -> str:
    """A commit on top of main in a local clone (pushed nowhere yet)."""
    clone = tmp_path / "clone"
    if not clone.exists():
        subprocess.run(["git", "clone", "-q", str(fake.bare), str(clone)], check=True)
    (clone / name).write_text(f"{name}\n")
    subprocess.run(["git", "-C", str(clone), "add", name], check=True)
    subprocess.run(
        ["git", "-C", str(clone), "-c", "user.name=desk", "-c", "user.email=d@x",
         "commit", "-q", "-m", name],
        check=True,
    )  # fmt: skip
    head = subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True)
    return head.stdout.decode().strip()


def api(fake: FakeGitHub, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=fake.api_url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )


def pull_request(fake: FakeGitHub, tmp_path: Path) -> tuple[int, str]:
    """The desk's branch ``assay/tidy`` pushed and a pull request opened for it."""
    head = commit_on_main(fake, tmp_path, "tidy.txt")
    pushed = push(fake, tmp_path, "ghs-bot", f"{head}:refs/heads/assay/tidy")
    assert pushed.returncode == 0, pushed.stderr
    with api(fake, "ghs-bot") as gh:
        made = gh.post(
            f"/repos/{fake.slug}/pulls",
            json={"title": "Tidy", "head": "assay/tidy", "base": "main", "body": ""},
        )
    assert made.status_code == 201, made.text
    return int(made.json()["number"]), head


def check(fake: FakeGitHub, token: str, head: str, conclusion: str) -> None:
    with api(fake, token) as gh:
        made = gh.post(
            f"/repos/{fake.slug}/check-runs",
            json={"name": "assay/evidence", "head_sha": head, "conclusion": conclusion},
        )
    assert made.status_code == 201, made.text


def merge(fake: FakeGitHub, token: str, number: int) -> httpx.Response:
    with api(fake, token) as gh:
        return gh.put(f"/repos/{fake.slug}/pulls/{number}/merge", json={"merge_method": "squash"})


def test_a_desk_token_cannot_push_main_past_the_gate(fake: FakeGitHub, tmp_path: Path) -> None:
    before = fake.ref("refs/heads/main")
    head = commit_on_main(fake, tmp_path, "sneaky.txt")
    pushed = push(fake, tmp_path, "ghs-bot", f"{head}:refs/heads/main")
    assert pushed.returncode != 0
    assert "GH013" in pushed.stderr and 'Required status check "assay/evidence"' in pushed.stderr
    assert fake.ref("refs/heads/main") == before
    deleted = push(fake, tmp_path, "ghs-bot", ":refs/heads/main")
    assert deleted.returncode != 0 and "Cannot delete this branch" in deleted.stderr
    # Custom refs are not a ruleset's: a desk token moves and deletes them (the gate fails
    # closed on each: docs/github.md, "Refs a desk job could delete").
    assert push(fake, tmp_path, "ghs-bot", f"{head}:refs/assay/evidence/tidy").returncode == 0
    assert push(fake, tmp_path, "ghs-bot", ":refs/assay/evidence/tidy").returncode == 0


def test_a_pull_request_merges_only_with_the_gate_apps_passing_check(
    fake: FakeGitHub, tmp_path: Path
) -> None:
    number, head = pull_request(fake, tmp_path)
    refused: list[dict[str, Any]] = []
    for token, conclusion in (("ghs-bot", "failure"), ("ghs-other", "success")):
        check(fake, token, head, conclusion)
        answer = merge(fake, "ghs-bot", number)
        assert answer.status_code == 405, answer.text
        refused.append(answer.json())
    # The gate's failing check, then another app's look-alike "success": neither lets the
    # desk's token merge through the API around Assay (the ruleset pins the GitHub Actions
    # app: integration_id).
    assert all("Required status check" in r["message"] for r in refused)
    assert fake.pulls[number]["merged"] is False
    check(fake, "ghs-bot", head, "success")  # the gate's own app, passing
    merged = merge(fake, "ghs-bot", number)
    assert merged.status_code == 200, merged.text
    assert fake.pulls[number]["merged"] is True
