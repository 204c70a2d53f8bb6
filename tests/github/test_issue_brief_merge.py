"""Attacks on an issue brief's accepted state, carried through to ``assay github merge``.

The brief ``tidy`` comes from issue #1, labelled ``assay`` and ``approval`` by a maintainer:
it needs a maintainer's approval before it merges. A desk job's token (``issues: write``,
``contents: write``) tries to get it merged without one: it removes the ``approval`` label,
pushes an approval nobody signed onto the brief's events ref, and pushes the accepted-state
record back to an older text a maintainer once signed. Each is refused at merge; then the
maintainer approves and it merges. Everything runs through the real CLI against the fake
GitHub, each command on a fresh runner (a cold cache).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from assay.desks.records.events import EventLog, events_ref
from assay.github.pins import pin_ref
from assay.refs import github_id_ref
from tests.github.fake_github import BOT, FakeGitHub
from tests.github.test_gate_check import DESK, Scene, desk_push, in_review, refused

WEAK = "---\nid: tidy\nverify:\n  - id: unit\n    run: 'true'\n---\nLeave a file called ok.\n"
STRONG = "---\nid: tidy\nverify:\n  - id: unit\n    run: test -e ok\n---\nLeave a file called ok.\n"


def as_user(fake: FakeGitHub, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=fake.api_url,
        headers={"Authorization": f"Bearer {token}", "User-Agent": "a-person"},
        timeout=10,
    )


def cli(scene: Scene, *args: str) -> dict[str, Any]:
    done = scene.run(*args, "--json", gate=True)
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    """``tidy`` in review, its brief issue #1: first accepted with a weak row by the
    maintainer's label, then with the real row by ``/assay accept DIGEST``."""
    with in_review(tmp_path_factory.mktemp("issue-merge"), {"README.md": "widgets\n"}) as made:
        fake = made.fake
        with as_user(fake, "ghp-maintainer") as gh:
            made_issue = gh.post(
                f"/repos/{fake.slug}/issues",
                json={"title": "Tidy up", "body": WEAK, "labels": ["assay", "approval"]},
            )
        number = int(made_issue.json()["number"])
        made.tips["issue"] = str(number)
        assert list(cli(made, "github", "events")["accepted"]) == [str(number)]
        made.tips["weak"] = str(fake.ref(pin_ref(number)))
        with as_user(fake, "ghp-maintainer") as gh:
            gh.patch(f"/repos/{fake.slug}/issues/{number}", json={"body": STRONG})
        noted = cli(made, "github", "events")
        assert noted["noted"] == [number]
        note = next(c["body"] for c in fake.comments.values() if "assay:issue-text" in c["body"])
        digest = note.split("/assay accept ")[1].split("`")[0]
        fake.add_comment(number, f"/assay accept {digest}", "maintainer")
        assert list(cli(made, "github", "events")["accepted"]) == [str(number)]
        made.tips["strong"] = str(fake.ref(pin_ref(number)))
        yield made


def issue(scene: Scene) -> int:
    return int(scene.tips["issue"])


def listed(scene: Scene) -> dict[str, Any]:
    (brief,) = cli(scene, "github", "briefs")["briefs"]
    result: dict[str, Any] = brief
    return result


@pytest.mark.slow
def test_the_desk_removing_the_approval_label_changes_nothing(scene: Scene) -> None:
    assert listed(scene)["needs_approval"] is True
    with as_user(scene.fake, "ghs-bot") as gh:
        gone = gh.delete(f"/repos/{scene.fake.slug}/issues/{issue(scene)}/labels/approval")
        assert gone.status_code == 200, gone.text
    assert "approval" not in scene.fake.issues[issue(scene)]["_labels"]
    ran = cli(scene, "github", "events")
    assert ran["accepted"] == {} and ran["noted"] == [issue(scene)]  # reported like a body edit
    brief = listed(scene)
    assert (brief["text"], brief["labels"], brief["needs_approval"]) == (
        "changed",
        ["approval"],
        True,
    )
    verified = cli(scene, "verify", "tidy")
    assert verified["passed"] is True  # the rows pass; the merge still waits for approval
    assert scene.gate_runs()[-1]["conclusion"] == "failure"
    refused(scene, "approval")


def test_a_writers_own_label_change_is_accepted_and_the_desks_still_not(scene: Scene) -> None:
    with as_user(scene.fake, "ghp-maintainer") as gh:
        gh.post(
            f"/repos/{scene.fake.slug}/issues/{issue(scene)}/labels",
            json={"labels": ["priority:2"]},
        )
    # The desk's removal of `approval` came after the accepted act too: not the writer's.
    assert cli(scene, "github", "events")["accepted"] == {}
    assert listed(scene)["labels"] == ["approval"]
    with as_user(scene.fake, "ghp-maintainer") as gh:
        gh.post(
            f"/repos/{scene.fake.slug}/issues/{issue(scene)}/labels", json={"labels": ["approval"]}
        )
    # The live labels are the maintainer's again, but the desk's change stays between.
    assert cli(scene, "github", "events")["accepted"] == {}


def test_an_approval_the_desk_pushed_refuses_the_merge(scene: Scene) -> None:
    EventLog(scene.forge, "tidy").append(
        "approve",
        text="",
        actor="maintainer",
        data={"source": "github", "comment": 1},
        event_id="github-comment-1",
    )
    refused(scene, "approval")


@pytest.mark.slow
def test_a_record_pushed_back_to_an_older_accepted_text_refuses_the_merge(scene: Scene) -> None:
    approval = scene.fake.add_comment(issue(scene), "/assay approve", "maintainer")
    appended = cli(scene, "github", "events")["appended"]
    assert [e["id"] for e in appended] == [f"github-comment-{approval['id']}"]
    assert cli(scene, "verify", "tidy")["passed"] is True
    # The record has moved on since the strong text was accepted: the maintainer's later
    # label acts were seen (and refused) and recorded as seen.
    latest = scene.fake.ref(pin_ref(issue(scene)))
    assert latest is not None and latest != scene.tips["strong"]
    desk_push(scene, pin_ref(issue(scene)), scene.tips["weak"])
    assert [r["run"] for r in listed(scene)["verify"]] == ["true"]
    assert cli(scene, "verify", "tidy")["passed"] is True  # the weak row, verified
    refused(scene, "rolled back", "maintainer's act label-")
    desk_push(scene, pin_ref(issue(scene)), scene.tips["strong"])  # not the newest either
    refused(scene, "rolled back")
    desk_push(scene, pin_ref(issue(scene)), latest)  # the gate verifies again below


@pytest.mark.slow
def test_an_events_ref_pushed_back_past_a_review_refuses_the_merge(scene: Scene) -> None:
    """The maintainer requests changes in a review of the pull request; the desk pushes the
    events ref back past it before the gate reads it. The brief is not waiting (its claim
    is done), so only reading the reviews of every changed pull request puts the review on
    the log; and the merge reads the reviews back from GitHub."""
    ref = events_ref("tidy")
    approved = scene.fake.ref(ref)
    with as_user(scene.fake, "ghp-maintainer") as gh:
        made = gh.post(
            f"/repos/{scene.fake.slug}/pulls/{scene.pull}/reviews",
            json={"event": "REQUEST_CHANGES", "body": "not like this"},
        )
        assert made.status_code == 200, made.text
    review = f"github-review-{made.json()['id']}"
    appended = cli(scene, "github", "events")["appended"]
    assert [(e["kind"], e["id"]) for e in appended] == [("reject", review)]
    answered = scene.fake.ref(ref)
    assert answered is not None and approved is not None
    desk_push(scene, ref, approved)  # the signed log's newest answer is the approval again
    assert cli(scene, "verify", "tidy")["passed"] is True
    refused(scene, f"maintainer's changes-requested review ({review})", "not on " + ref)
    desk_push(scene, ref, answered)
    # The maintainer approves in a second review: read, and the newest answer again.
    with as_user(scene.fake, "ghp-maintainer") as gh:
        again = gh.post(
            f"/repos/{scene.fake.slug}/pulls/{scene.pull}/reviews", json={"event": "APPROVE"}
        )
    appended = cli(scene, "github", "events")["appended"]
    assert [(e["kind"], e["id"]) for e in appended] == [
        ("approve", f"github-review-{again.json()['id']}")
    ]


@pytest.mark.slow
def test_an_events_ref_pushed_back_past_a_reject_refuses_the_merge(scene: Scene) -> None:
    ref = events_ref("tidy")
    approved = scene.fake.ref(ref)
    assert approved is not None
    for command in ("/assay reject not like this", "/assay approve"):
        scene.fake.add_comment(issue(scene), command, "maintainer")
    assert len(cli(scene, "github", "events")["appended"]) == 2
    assert cli(scene, "verify", "tidy")["published"] == ["check+"]
    answered = scene.fake.ref(ref)
    assert answered is not None
    # Back to the first approval, past the signed reject: every record left is signed, the
    # newest answer is an approval, and the runner's cache is cold.
    desk_push(scene, ref, approved)
    refused(scene, "events rollback", approved[:12])
    desk_push(scene, ref, answered)

    # The maintainer rejects again; the desk pushes the ref back before the gate reads it,
    # so the gate's proof names the rolled-back tip. GitHub's comments still hold the reject.
    reject = scene.fake.add_comment(issue(scene), "/assay reject still not", "maintainer")
    assert len(cli(scene, "github", "events")["appended"]) == 1
    desk_push(scene, ref, answered)
    assert cli(scene, "verify", "tidy")["passed"] is True
    refused(scene, f"github-comment-{reject['id']}", "is not on refs/assay/events/tidy")
    # The events job's next run reads the last minute again and finds the reject missing.
    healed = cli(scene, "github", "events")["appended"]
    assert [e["id"] for e in healed] == [f"github-comment-{reject['id']}"]
    refused(scene)
    # The maintainer answers again: the newest answer is on the log, the lost one superseded.
    scene.fake.add_comment(issue(scene), "/assay approve", "maintainer")
    assert len(cli(scene, "github", "events")["appended"]) == 1
    merged = scene.merge()
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert scene.fake.pulls[scene.pull]["merged"] is True
    assert BOT not in {e.actor for e in EventLog(scene.forge, "tidy").read()}
    assert DESK.name == BOT


def _tidy_refs(scene: Scene) -> dict[str, str]:
    """Every ref of the brief ``tidy`` on the fake GitHub (claim, events, evidence, journal,
    mirror record, branch, id binding), by name."""
    listed = subprocess.run(
        [
            "git",
            "--git-dir",
            str(scene.fake.bare),
            "for-each-ref",
            "--format=%(refname) %(objectname)",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    pairs = (line.split(" ") for line in listed if line)
    return {ref: sha for ref, sha in pairs if ref.endswith("/tidy")}


@pytest.mark.slow
def test_a_newer_issue_naming_a_merged_briefs_id_is_refused(scene: Scene, tmp_path: Path) -> None:
    """Issue #1's brief ``tidy`` merged and the issue closed: a newer issue that a maintainer
    labels, declaring ``id: tidy``, would inherit its claim, events and evidence. The id
    stays #1's: the newer issue is refused (65 for it, told once), a maintainer's approval
    on it reaches no brief, and a desk deleting the binding frees nothing."""
    fake = scene.fake
    assert fake.pulls[scene.pull]["merged"] is True
    with as_user(fake, "ghp-maintainer") as gh:
        closed = gh.patch(f"/repos/{fake.slug}/issues/{issue(scene)}", json={"state": "closed"})
        assert closed.status_code == 200, closed.text
        made = gh.post(
            f"/repos/{fake.slug}/issues",
            json={"title": "Tidy again", "body": STRONG, "labels": ["assay"]},
        )
    newer = int(made.json()["number"])
    before = _tidy_refs(scene)
    assert before[github_id_ref("tidy")] and before[events_ref("tidy")]

    told = cli(scene, "github", "events")
    assert list(told["accepted"]) == [str(newer)] and told["bound"] == {}
    assert told["id_noted"] == [newer]
    assert cli(scene, "github", "events")["id_noted"] == []  # told once
    (note,) = [c["body"] for c in fake.comments.values() if f"issue-id issue={newer}" in c["body"]]
    assert f"belongs to issue #{issue(scene)}" in note
    fake.add_comment(newer, "/assay approve", "maintainer")
    assert cli(scene, "github", "events")["appended"] == []  # no brief of #newer to approve

    listing = cli(scene, "github", "briefs")
    assert listing["briefs"] == []
    assert [e for e in listing["errors"] if e.startswith(f"issue #{newer}: brief id 'tidy'")]
    named = scene.run("wake", "--brief", f"issue-{newer}", "--desks", str(tmp_path))
    assert named.returncode == 65 and f"belongs to issue #{issue(scene)}" in named.stderr, (
        named.stdout + named.stderr
    )
    assert _tidy_refs(scene) == before

    # A desk job deletes the binding: the id is nobody's (the newer issue is still no
    # brief), and the events job binds it again to the closed issue that named it first.
    desk_push(scene, github_id_ref("tidy"), None)
    gone = cli(scene, "github", "briefs")
    assert gone["briefs"] == [] and [e for e in gone["errors"] if "not bound" in e]
    assert cli(scene, "github", "events")["bound"] == {"tidy": issue(scene)}
    assert {k: v for k, v in _tidy_refs(scene).items() if k != github_id_ref("tidy")} == {
        k: v for k, v in before.items() if k != github_id_ref("tidy")
    }
    again = cli(scene, "github", "briefs")["errors"]
    assert [e for e in again if e.startswith(f"issue #{newer}") and f"issue #{issue(scene)}" in e]
