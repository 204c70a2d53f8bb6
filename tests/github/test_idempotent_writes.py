"""Creates are not blindly retried, and a command's waits are capped in all.

A 502 answered after GitHub made a comment used to be retried as a new POST: two claim
comments on the issue, one of them stale forever. Now a create whose answer does not say
whether it was made is reconciled (the comment found by its marker, the pull request by its
head) before it is sent again, or reported ``WriteUncertain`` when nothing can be re-read.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from assay.branch import BranchSync
from assay.claims import ClaimStore
from assay.desks.records.review import write_review
from assay.errors import ForgeUnavailable
from assay.forge import Identity
from assay.github.api import BatchRefused, GitHubApi
from assay.github.events import collect_events
from assay.github.forge import open_github_forge
from assay.github.init import starter_files
from assay.github.mirror import GitHubMirror
from assay.github.rest import RestClient, WriteUncertain
from assay.github.sync import sync
from tests.conftest import AssayRunner
from tests.github.fake_github import BOT, FakeGitHub

ISSUE = "---\nid: tidy\nverify:\n  - id: unit\n    run: python -m pytest -q\n---\nTidy up.\n"


def make(fake: FakeGitHub, **kwargs: object) -> RestClient:
    kwargs.setdefault("write_spacing_s", 0.0)
    kwargs.setdefault("sleep", lambda seconds: None)
    return RestClient(fake.api_url, "ghs-bot", **kwargs)  # type: ignore[arg-type]


def open_issue(fake: FakeGitHub) -> int:
    with httpx.Client(
        base_url=fake.api_url,
        headers={"Authorization": "Bearer ghp-maintainer", "User-Agent": "person"},
    ) as gh:
        made = gh.post(
            f"/repos/{fake.slug}/issues", json={"title": "Tidy", "body": ISSUE, "labels": ["assay"]}
        )
        return int(made.json()["number"])


def bot_comments(fake: FakeGitHub, number: int) -> list[dict[str, object]]:
    return [
        c for c in fake.comments.values() if c["_issue"] == number and c["user"]["login"] == BOT
    ]


def test_a_502_after_the_claim_comment_was_made_leaves_one_comment(
    fake_github: FakeGitHub,
    run_assay: AssayRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_github.seed_main({path: source.read_text() for path, source in starter_files().items()})
    number = open_issue(fake_github)
    env = {
        "GITHUB_API_URL": fake_github.api_url,
        "GITHUB_TOKEN": "ghs-bot",
        "ASSAY_STATE": str(tmp_path / "state"),
        "ASSAY_GITHUB_WRITE_SPACING": "0",
        "ASSAY_FORGE": f"github:{fake_github.slug}",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with open_github_forge(f"github:{fake_github.slug}", cache_dir=tmp_path / "setup") as forge:
        assert number in collect_events(forge).accepted  # the maintainer's label: a brief
        store = ClaimStore(forge)
        store.acquire("tidy", "example", lease_s=600)
    # The claim's label and comment go in one GraphQL request; GitHub does it and answers
    # 502, which does not say so.
    fake_github.inject(502, method="POST", path_contains="/graphql", after=True)
    done = run_assay("github", "sync", "--only", "claims", "--json", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    made = bot_comments(fake_github, number)
    assert len(made) == 1, made
    posts = [c for c in fake_github.calls if c.method == "POST" and c.path == "/graphql"]
    # Reconciled by reading (the comment found by its marker), and only the label, which
    # setting twice leaves once, sent again: never a second comment.
    assert [c.status for c in posts] == [502, 200]
    assert "assay:claimed" in fake_github.issues[number]["_labels"]
    assert json.loads(done.stdout)["actions"]["tidy"] == ["comment+", "label+"]
    with open_github_forge(f"github:{fake_github.slug}", cache_dir=tmp_path / "check") as forge:
        assert GitHubMirror(forge).state("tidy").comment_id == made[0]["id"]
    # The next sync edits that comment; it never makes a second one.
    again = run_assay("github", "sync", "--only", "claims", "--json", env=env)
    assert again.returncode == 0 and len(bot_comments(fake_github, number)) == 1
    assert json.loads(again.stdout)["rest"]["writes"] == 0


def test_a_refused_pull_request_keeps_what_its_request_made_beside_it(
    fake_github: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GitHub runs a request's mutations in order and a refused one leaves the others done:
    the claim comment made beside a refused pull request is recorded, so the next sync
    tries the pull request again and never makes a second comment."""
    fake_github.seed_main({path: source.read_text() for path, source in starter_files().items()})
    number = open_issue(fake_github)
    for key, value in {
        "GITHUB_API_URL": fake_github.api_url,
        "GITHUB_TOKEN": "ghs-bot",
        "ASSAY_STATE": str(tmp_path / "state"),
        "ASSAY_GITHUB_WRITE_SPACING": "0",
    }.items():
        monkeypatch.setenv(key, value)
    with open_github_forge(f"github:{fake_github.slug}", cache_dir=tmp_path / "c") as forge:
        assert number in collect_events(forge).accepted
        store = ClaimStore(forge)
        claim = store.acquire("tidy", "example", lease_s=600)
        tree = BranchSync(forge, "tidy", workdir=tmp_path / "w", identity=Identity("d", "d@x"))
        (tree.checkout() / "ok").write_text("ok\n")
        head = tree.sync("ok")
        store.set_waiting(claim, "approval")
        write_review(forge, "tidy", head_sha=head, title="Tidy", body="", state="ready")
        # Someone opened a pull request from the brief's branch first: GitHub refuses a
        # second one.
        with httpx.Client(
            base_url=fake_github.api_url,
            headers={"Authorization": "Bearer ghp-maintainer", "User-Agent": "person"},
        ) as gh:
            made = gh.post(
                f"/repos/{fake_github.slug}/pulls",
                json={"title": "mine", "head": "assay/tidy", "base": "main"},
            )
            assert made.status_code == 201
        for _ in range(2):
            with pytest.raises(BatchRefused, match="already exists"):
                sync(forge, ["tidy"], parts=("claims", "reviews"))
            state = GitHubMirror(forge).state("tidy")
            assert state.label and state.comment_id is not None and state.pull is None
            assert len(bot_comments(fake_github, number)) == 1


def test_a_502_before_the_create_is_sent_again_once(fake_github: FakeGitHub) -> None:
    number = open_issue(fake_github)
    fake_github.inject(502, method="POST", path_contains="/comments")
    with make(fake_github) as rest:
        api = GitHubApi(rest, "acme", "widgets")
        made = api.create_comment(number, "<!-- assay:claim brief=tidy -->\nheld")
    assert [c["id"] for c in bot_comments(fake_github, number)] == [made["id"]]


def test_a_stranger_look_alike_is_not_taken_for_the_comment(fake_github: FakeGitHub) -> None:
    number = open_issue(fake_github)
    body = "<!-- assay:claim brief=tidy -->\nheld"
    fake_github.add_comment(number, body, "stranger")
    fake_github.inject(502, method="POST", path_contains="/comments")
    with make(fake_github) as rest:
        made = GitHubApi(rest, "acme", "widgets").create_comment(number, body)
    assert made["user"]["login"] == BOT and len(bot_comments(fake_github, number)) == 1


def test_a_create_with_nothing_to_reread_is_uncertain_not_repeated(
    fake_github: FakeGitHub,
) -> None:
    fake_github.seed_main({path: source.read_text() for path, source in starter_files().items()})
    fake_github.inject(502, method="POST", path_contains="/dispatches", after=True)
    with make(fake_github) as rest:
        api = GitHubApi(rest, "acme", "widgets")
        with pytest.raises(WriteUncertain) as caught:
            api.dispatch("assay-desk.yml", inputs={"desk": "example", "brief": "tidy"})
    assert caught.value.code == ForgeUnavailable.code == 69
    assert len(fake_github.dispatches) == 1


def test_waits_are_capped_in_all(fake_github: FakeGitHub) -> None:
    waited: list[float] = []
    fake_github.inject(429, retry_after=40, method="GET", count=5)
    rest = make(fake_github, max_total_wait_s=100.0, sleep=waited.append)
    with rest, pytest.raises(ForgeUnavailable, match="in all"):
        rest.get("/rate_limit")
    assert waited == [40, 40]  # a third 40 s wait would pass the 100 s cap
