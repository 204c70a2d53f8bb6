"""The GitHub forge adapter end to end against the fake: a whole brief lifecycle, counted.

Issue -> the events job accepting its text -> claim (git only) -> the desk's sync (label,
comment and the pull request, ready, in one GraphQL request) -> gate dispatched -> check run
-> ``/assay approve`` comment -> merge (one GraphQL request: squash, comment, label). The
REST and GraphQL requests are counted by the fake (what GitHub charges against the primary
limit: a conditional read answered 304 is free) and by the client, and asserted against
issue 26's budget: at most 8 charged requests and 5 writes (content-creating requests,
GitHub's secondary limit) a brief, each events poll's shared lists (the open issues, the
open pull requests, the comments since the cursor) counted once a poll, not per brief: one
poll reads them for every brief with news. docs/github.md ("Rate limits") says what each
request is and why the approval comment's poll costs one over.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from assay.branch import BranchSync
from assay.claims import ClaimStore
from assay.desks.records.events import EventLog
from assay.desks.records.review import write_review
from assay.errors import BadInput
from assay.evidence.keys import gate_key
from assay.evidence.rule import MergeDecision, RowStatus, Verdict
from assay.evidence.table import render_markdown
from assay.forge import Identity, open_forge
from assay.github.events import collect_events, parse_command
from assay.github.forge import GitHubForge
from assay.github.init import starter_files
from assay.github.issues import issue_briefs
from assay.github.mirror import CHECK_NAME, CLAIM_LABEL, GitHubMirror, review_body
from assay.github.sync import sync
from assay.github.target import git_url_for, resolve_target
from tests.github.fake_github import BOT, FakeGitHub

BRIEF = "add-median"
ISSUE_BODY = """---
id: add-median
verify:
  - id: unit
    run: python -m pytest -q
---
Add `median()` to stats.py.
"""
LIFECYCLE_BUDGET = 8  # charged requests a brief, each events poll's shared lists apart
WRITES_BUDGET = 5  # content-creating requests a brief
# What one events poll reads for every brief at once: the open issues, the open pull
# requests and the comments since the cursor (each a conditional list).
POLL_LISTS = ("/issues", "/pulls", "/issues/comments")


@pytest.fixture
def github_env(fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GITHUB_API_URL", fake_github.api_url)
    monkeypatch.setenv("GITHUB_TOKEN", "ghs-bot")
    monkeypatch.setenv("ASSAY_GITHUB_WRITE_SPACING", "0")
    monkeypatch.setenv("ASSAY_STATE", str(tmp_path / "state"))
    monkeypatch.delenv("ASSAY_GITHUB_GIT_URL", raising=False)
    monkeypatch.delenv("ASSAY_GITHUB_TOKEN_ENV", raising=False)
    fake_github.seed_main(
        {path: source.read_text() for path, source in starter_files().items()}
        | {"stats.py": "def mean(xs):\n    return sum(xs) / len(xs)\n"}
    )


@pytest.fixture
def forge(github_env: None, tmp_path: Path) -> Iterator[GitHubForge]:
    opened = open_forge("github:acme/widgets", cache_dir=tmp_path / "cache")
    assert isinstance(opened, GitHubForge)
    with opened:
        yield opened


def as_user(fake: FakeGitHub, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=fake.api_url,
        headers={"Authorization": f"Bearer {token}", "User-Agent": "a-person"},
        timeout=10,
    )


def open_issue(fake: FakeGitHub, body: str = ISSUE_BODY) -> int:
    with as_user(fake, "ghp-maintainer") as gh:
        made = gh.post(
            "/repos/acme/widgets/issues",
            json={"title": "Add a median", "body": body, "labels": ["assay"]},
        )
        assert made.status_code == 201
        return int(made.json()["number"])


def open_brief_issue(fake: FakeGitHub, forge: GitHubForge, body: str = ISSUE_BODY) -> int:
    """An issue a maintainer opens labelled ``assay``, and the events job that fixes its
    text as the brief (``assay.github.pins``): only then is it a brief."""
    number = open_issue(fake, body)
    assert collect_events(forge).accepted == {number: f"label-{fake.timeline[number][-1]['id']}"}
    return number


def comment(fake: FakeGitHub, number: int, text: str, token: str) -> int:
    with as_user(fake, token) as gh:
        made = gh.post(f"/repos/acme/widgets/issues/{number}/comments", json={"body": text})
        assert made.status_code == 201
        return int(made.json()["id"])


def judged(head: str, *, verified: str | None, verdict: Verdict) -> MergeDecision:
    """The merge rule's standing of the brief's one row (the gate's side is not under test
    here: what GitHub is sent of it is)."""
    row = RowStatus(
        "unit", "python -m pytest -q", "pass", verified, head if verified else None, verdict
    )
    return MergeDecision(BRIEF, head, [row])


def test_a_whole_brief_lifecycle_within_the_rest_budget(
    fake_github: FakeGitHub, forge: GitHubForge, tmp_path: Path
) -> None:
    accepted = fake_github.charged(BOT)
    issue = open_brief_issue(fake_github, forge)
    # The events job fixes the maintainer's text (git) after reading the open issues, the
    # issue's timeline, the labeller's permission, the open pull requests and the comments:
    # 5, once per new text.
    assert fake_github.charged(BOT) - accepted == 5
    # The repository's first claim makes the label `assay:claimed` (a look, a make), and a
    # client learns the repository's node id once (GraphQL names it so): once per
    # repository or per client, not per brief.
    forge.api.label_node(CLAIM_LABEL)
    forge.api.repository_node()
    assert fake_github.charged(BOT) - accepted == 8 and CLAIM_LABEL in fake_github.labels
    charged, first_call = fake_github.charged(BOT), len(fake_github.calls)

    def spent() -> int:
        return fake_github.charged(BOT) - charged

    briefs = issue_briefs(forge)
    assert list(briefs.briefs) == [BRIEF] and not briefs.errors
    brief = briefs.briefs[BRIEF].brief
    assert brief.title == "Add a median" and [row.id for row in brief.verify] == ["unit"]
    assert spent() == 0

    # Claims and heartbeats go over git only.
    store = ClaimStore(forge)
    claim = store.acquire(BRIEF, "example", lease_s=60)
    claim = store.renew(claim)
    assert spent() == 0
    assert any(call.path.startswith("git:") for call in fake_github.calls)

    # The desk's work, pushed over git as one checkpoint; its run ends waiting for approval
    # with its review ready.
    sync_tree = BranchSync(
        forge, BRIEF, workdir=tmp_path / "work", identity=Identity.for_holder("example", "h")
    )
    work = sync_tree.checkout()
    (work / "stats.py").write_text(
        "def mean(xs):\n    return sum(xs) / len(xs)\n\n\n"
        "def median(xs):\n    s = sorted(xs)\n    return s[len(s) // 2]\n"
    )
    head = sync_tree.sync("add median")
    claim = store.set_waiting(claim, "approval")
    write_review(
        forge, BRIEF, head_sha=head, title=brief.title, body="Added median().", state="ready"
    )
    assert spent() == 0

    # The desk job's sync: the claim's label and comment and the pull request, opened ready
    # for review since the run has finished, in one GraphQL request; then the gate
    # dispatched (GITHUB_TOKEN pushes start no workflow).
    desk_job = ("claims", "reviews")  # the desk job holds no gate key: it judges nothing
    done = sync(forge, [BRIEF], parts=desk_job, gate_workflow="assay-gate.yml")
    assert done.actions == {BRIEF: ["label+", "comment+", "pull+", "gate>"]}
    assert spent() == 2
    mirror = GitHubMirror(forge)
    pull = mirror.state(BRIEF).pull
    assert pull is not None and fake_github.pulls[pull]["draft"] is False
    assert CLAIM_LABEL in fake_github.issues[issue]["_labels"]
    assert fake_github.dispatches[-1]["inputs"] == {"brief": BRIEF, "sha": head}
    claim = store.renew(claim)
    assert sync(forge, [BRIEF], parts=desk_job, gate_workflow="assay-gate.yml").actions == {
        BRIEF: []
    }
    assert spent() == 2  # a heartbeat changes nothing people see: not even a read

    # The gate's rows as the check run on the head commit: what is there is re-read (1),
    # a run made (1) and completed with the gate's signature over its id (1).
    verified = judged(head, verified="pass", verdict=Verdict.PASS)
    key = gate_key(create=True)
    run_id = mirror.publish_evidence(BRIEF, decision=verified, key=key)
    assert spent() == 5
    check = fake_github.check_runs[run_id]
    assert (check["name"], check["conclusion"], check["head_sha"]) == (CHECK_NAME, "success", head)
    # The check run's text is the review's table, from the one renderer of the verdict.
    assert check["output"]["text"] == render_markdown(verified)
    assert mirror.publish_evidence(BRIEF, decision=verified, key=key) == run_id
    assert spent() == 6  # a re-read of the runs, and nothing written
    repeated = 1

    # A maintainer approves on the pull request; the comment becomes one event.
    approval = comment(fake_github, pull, "/assay approve ship it", "ghp-maintainer")
    # A second later on GitHub (stamps are whole seconds): the claim comment changed the
    # issue after the maintainer's label.
    fake_github.issues[issue]["updated_at"] = "2099-01-01T00:00:00Z"
    polled = len(fake_github.calls)
    report = collect_events(forge)
    assert [(e["kind"], e["actor"], e["text"]) for e in report.appended] == [
        ("approve", "maintainer", "ship it")
    ]
    # The poll's shared lists: the comments since the cursor (1) and which brief each
    # number is, from GitHub (open issues and pull requests, 2), never from the mirror
    # record. The brief's own: the issue's timeline (1), since the issue changed (the claim
    # label and comment) after the last writer act its accepted-text record has seen, and
    # the pull request's reviews (1), since it changed. The author's permission was read
    # when the maintainer's label was checked (once per client).
    poll = [
        c.path.removeprefix("/repos/acme/widgets")
        for c in fake_github.calls[polled:]
        if c.user == BOT and not c.path.startswith("git:") and c.status != 304
    ]
    assert sorted(poll) == sorted(
        [*POLL_LISTS, f"/issues/{issue}/timeline", f"/pulls/{pull}/reviews"]
    )
    assert spent() == 11
    # The same delivery again (a webhook retry): consumed once. The cursor moved to the
    # approval, so this is one list since it (GitHub's since is inclusive); then a free 304.
    again = collect_events(forge)
    assert again.appended == [] and again.duplicates == [f"github-comment-{approval}"]
    assert spent() == 12
    assert collect_events(forge).appended == []
    assert spent() == 12
    repeated += 1
    events = EventLog(forge, BRIEF).read()
    assert [(e.id, e.kind) for e in events] == [(f"github-comment-{approval}", "approve")]

    # Merge at the verified head: one GraphQL request squashes, says done in the claim
    # comment and drops the label.
    claim = store.acquire(BRIEF, "example", lease_s=60, allow_waiting=True)
    final = review_body(BRIEF, issue=issue, summary="Added median().", decision=verified)
    finished = dataclasses.replace(claim.record, state="done")
    message = f"Add median\n\nAssay-Brief: {BRIEF}\nAssay-Head: {head}\n"
    merged = mirror.merge(BRIEF, head_sha=head, body=final, claim=finished, message=message)
    assert merged == ["updatePullRequest", "mergePullRequest", "updateIssueComment", "label-"]
    store.release(claim, done=True)
    assert spent() == 13

    # The budget (issue 26), counted as `python -m tests.bench.github_budget` counts it:
    # from the maintainer's label to the merge, less what a repository or a client pays
    # once (the label made: a look and a make; the repository's node id; the labeller's
    # permission), the repeated reads (not steps), and each events poll's shared lists (read
    # once a poll for every brief with news). A brief its gate's pass merges makes no
    # approval poll and is within 8; the approval comment's poll adds its own reads of the
    # issue's timeline and the pull request's reviews, one over (docs/github.md, "Rate
    # limits", says why each stays).
    once = 4
    own = fake_github.charged(BOT) - accepted - once - repeated - 2 * len(POLL_LISTS)
    approval_poll = 2
    assert own == LIFECYCLE_BUDGET + 1 and own - approval_poll <= LIFECYCLE_BUDGET
    api = [
        c for c in fake_github.calls[first_call:] if c.user == BOT and not c.path.startswith("git:")
    ]
    writes = [
        (c.method, c.path.removeprefix("/repos/acme/widgets")) for c in api if c.method != "GET"
    ]
    assert writes == [
        ("POST", "/graphql"),  # label, comment, ready pull request
        ("POST", "/actions/workflows/assay-gate.yml/dispatches"),
        ("POST", "/check-runs"),
        ("PATCH", f"/check-runs/{run_id}"),
        ("POST", "/graphql"),  # body, squash, comment, label
    ]
    assert len(writes) <= WRITES_BUDGET
    assert forge.rest.stats.charged == fake_github.charged(BOT) - accepted
    # Every push of it kept to GitHub's 6 a window: the fake never had to refuse one.
    assert fake_github.throttled_pushes == [] and fake_github.most_pushes_in_window() <= 6

    # What GitHub now shows.
    assert fake_github.pulls[pull]["merged"] is True
    assert fake_github.issues[issue]["state"] == "closed"  # "Closes #N" in the body
    assert CLAIM_LABEL not in fake_github.issues[issue]["_labels"]
    bot_comments = [
        c
        for c in fake_github.comments.values()
        if c["_issue"] == issue and c["user"]["login"] == BOT
    ]
    assert len(bot_comments) == 1 and "**done**" in bot_comments[0]["body"]
    main = fake_github.ref("refs/heads/main")
    assert main is not None
    assert "def median" in fake_github._git("show", f"{main}:stats.py")


def test_an_approval_without_write_permission_is_ignored_and_reported(
    fake_github: FakeGitHub, forge: GitHubForge
) -> None:
    issue = open_brief_issue(fake_github, forge)
    store = ClaimStore(forge)
    claim = store.set_waiting(store.acquire(BRIEF, "example", lease_s=60), "approval")
    GitHubMirror(forge).claim(BRIEF, claim.record, issue=issue)
    sneaky = comment(fake_github, issue, "/assay approve", "ghp-stranger")
    report = collect_events(forge)
    assert report.appended == []
    assert [(i.actor, i.source) for i in report.ignored] == [
        ("stranger", f"github-comment-{sneaky}")
    ]
    assert "read permission" in report.ignored[0].reason
    assert EventLog(forge, BRIEF).read() == []
    # The payload's author_association is never trusted: only the API's permission counts.
    assert any("/permission" in call.path for call in fake_github.calls)


def test_steer_reject_and_cancel_commands_and_reviews(
    fake_github: FakeGitHub, forge: GitHubForge, tmp_path: Path
) -> None:
    issue = open_brief_issue(fake_github, forge)
    mirror = GitHubMirror(forge)
    store = ClaimStore(forge)
    claim = store.acquire(BRIEF, "example", lease_s=60)
    mirror.claim(BRIEF, claim.record, issue=issue)
    sync = BranchSync(forge, BRIEF, workdir=tmp_path / "w", identity=Identity("d", "d@x"))
    (sync.checkout() / "x.txt").write_text("x\n")
    sync.sync("x")
    mirror.open_review(BRIEF, title="t", branch=f"assay/{BRIEF}", body="b")
    pull = mirror.state(BRIEF).pull
    assert pull is not None
    comment(fake_github, issue, "/assay steer use the statistics module", "ghp-maintainer")
    comment(fake_github, pull, "/assay reject\nnot like this", "ghp-maintainer")
    comment(fake_github, issue, "please /assay approve (not a command)", "ghp-maintainer")
    comment(fake_github, issue, "/assay cancel", "ghp-maintainer")
    with as_user(fake_github, "ghp-maintainer") as gh:
        gh.post(
            f"/repos/acme/widgets/pulls/{pull}/reviews",
            json={"event": "APPROVE", "body": "lgtm"},
        )
    report = collect_events(forge, reviews_for=[BRIEF])
    assert [(e["kind"], e["text"]) for e in report.appended] == [
        ("signal", "use the statistics module"),
        ("reject", ""),
        ("cancel", ""),
        ("approve", "lgtm"),
    ]


def test_limits_are_waited_out_through_the_adapter(
    fake_github: FakeGitHub, forge: GitHubForge
) -> None:
    issue = open_issue(fake_github)
    fake_github.inject(429, retry_after=1, method="POST", path_contains="/labels")
    fake_github.inject(403, secondary=True, retry_after=1, method="POST", path_contains="/graphql")
    claim = ClaimStore(forge).acquire(BRIEF, "example", lease_s=60)
    started = time.monotonic()
    assert GitHubMirror(forge).claim(BRIEF, claim.record, issue=issue) == ["label+", "comment+"]
    assert time.monotonic() - started >= 2.0
    assert forge.rest.stats.retries == 2
    assert CLAIM_LABEL in fake_github.issues[issue]["_labels"]


def test_issue_briefs_from_labels_and_bad_front_matter(
    fake_github: FakeGitHub, forge: GitHubForge
) -> None:
    with as_user(fake_github, "ghp-maintainer") as gh:
        gh.post(
            "/repos/acme/widgets/issues",
            json={
                "title": "Plain issue",
                "body": "Just words.",
                "labels": ["assay", "desk:example", "priority:3", "python"],
            },
        )
        gh.post(
            "/repos/acme/widgets/issues",
            json={"title": "Broken", "body": "---\nverify: 12\n---\n", "labels": ["assay"]},
        )
        gh.post("/repos/acme/widgets/issues", json={"title": "Not a brief"})
    collect_events(forge)  # the maintainer's labels fix both texts
    found = issue_briefs(forge)
    briefs, bad = forge.extra_briefs()
    assert set(briefs) == {"issue-1"} and set(bad) == {"issue #2"}
    plain = found.briefs["issue-1"].brief
    assert (plain.desk, plain.priority, plain.labels) == ("example", 3, ["python"])
    assert plain.body.strip() == "Just words."
    assert len(found.errors) == 1 and "issue #2" in found.errors[0].message
    assert "verify" in found.errors[0].message


def test_target_resolution_keeps_the_token_out_of_urls(fake_github: FakeGitHub) -> None:
    env = {"GITHUB_API_URL": fake_github.api_url, "MY_TOKEN": "ghs-bot"}
    target = resolve_target("github:acme/widgets", environ=env, token_env="MY_TOKEN")
    assert target.git_url == fake_github.git_url
    assert "ghs-bot" not in repr(target) and "ghs-bot" not in target.git_url
    assert git_url_for("https://api.github.com", "o", "r") == "https://github.com/o/r.git"
    assert git_url_for("https://ghe.example/api/v3", "o", "r") == "https://ghe.example/o/r.git"
    given = resolve_target(
        "github:acme/widgets",
        environ={**env, "ASSAY_GITHUB_GIT_URL": "https://git.example/x.git"},
        token_env="MY_TOKEN",
    )
    assert given.git_url == "https://git.example/x.git"
    with pytest.raises(BadInput, match=r"\$GITHUB_TOKEN"):
        resolve_target("github:acme/widgets", environ={})
    for bad in ("github:", "github:acme", "github:a/b/c", "github:../x"):
        with pytest.raises(BadInput, match="github:OWNER/REPO"):
            resolve_target(bad, environ=env)


def test_a_wrong_token_cannot_use_the_git_layer(
    fake_github: FakeGitHub, github_env: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "not-a-token")
    with open_forge("github:acme/widgets", cache_dir=tmp_path / "c") as forge:
        with pytest.raises(Exception) as failed:
            forge.ls_refs("refs/heads/")
        assert "not-a-token" not in str(failed.value)


def test_parse_command_accepts_only_the_four_verbs() -> None:
    assert parse_command("/assay approve") == ("approve", "")
    assert parse_command("  /assay steer go left\nmore") == ("signal", "go left")
    assert parse_command("/assay steer") is None
    assert parse_command("/assay merge") is None
    assert parse_command("/assayapprove") is None
    assert parse_command("hello /assay approve") is None
