"""Attack: a desk job pushes an event naming a maintainer onto an events ref on GitHub.

On GitHub any job with ``contents: write`` moves ``refs/assay/*``, so the events ref is no
proof of who sent an event. The events job (``assay github events``), which checks each
comment's author through the API, signs what it appends with the gate's key; every reader
there counts only events that key signed, and skips the rest with a note.
"""

from __future__ import annotations

import json

from assay.desks.records.events import EventLog
from assay.evidence.keys import gate_key
from assay.forge import RefLog
from assay.github.events import collect_events
from assay.github.forge import GitHubForge
from assay.github.mirror import GitHubMirror
from assay.plumbing import Identity
from tests.github import test_adapter
from tests.github.fake_github import FakeGitHub
from tests.github.test_adapter import BRIEF, comment, open_issue

# The adapter tests' fixtures: a GitHub forge on the fake, as the bot.
github_env = test_adapter.github_env
forge = test_adapter.forge


def _forge_an_approval(forge: GitHubForge, *, sig: str = "") -> None:
    """What a desk job can do with its own token: append a record naming a maintainer."""
    record = {
        "id": "github-comment-999",
        "event": "approve",
        "text": "",
        "actor": "maintainer",
        "at": "2026-01-01T00:00:00.000000Z",
        "data": {"name": "approval"},
    }
    if sig:
        record["sig"] = sig
    RefLog(forge, f"refs/assay/events/{BRIEF}", kind="events").append(
        record, author=Identity("github-actions[bot]", "bot@example.invalid")
    )


def test_an_approval_pushed_by_a_desk_job_is_never_read_as_the_maintainers(
    fake_github: FakeGitHub, forge: GitHubForge
) -> None:
    open_issue(fake_github)
    _forge_an_approval(forge)
    log = EventLog(forge, BRIEF)
    assert log.read() == []
    assert "unsigned, and any job may write this ref" in log.skipped[0]


def test_a_signature_by_another_key_does_not_count_either(
    fake_github: FakeGitHub, forge: GitHubForge
) -> None:
    from tests.gatekeys import key_for

    open_issue(fake_github)
    assert gate_key(create=True) is not None  # the gate's key, which readers trust
    desk_key = key_for("a desk's own")
    _forge_an_approval(forge, sig=desk_key.sign(b"whatever the desk likes"))
    log = EventLog(forge, BRIEF)
    assert log.read() == []
    assert "not signed by the gate key" in log.skipped[0]


def test_the_events_job_signs_what_it_checked_and_readers_count_it(
    fake_github: FakeGitHub, forge: GitHubForge
) -> None:
    issue = open_issue(fake_github)
    from assay.claims import ClaimStore

    store = ClaimStore(forge)
    claim = store.set_waiting(store.acquire(BRIEF, "example", lease_s=60), "approval")
    GitHubMirror(forge).claim(BRIEF, claim.record, issue=issue)
    comment(fake_github, issue, "/assay approve", "ghp-maintainer")
    _forge_an_approval(forge)  # a forged one beside the real one
    report = collect_events(forge)
    assert [event["actor"] for event in report.appended] == ["maintainer"]
    log = EventLog(forge, BRIEF)
    [approval] = log.read()
    assert approval.kind == "approve" and approval.id.startswith("github-comment-")
    assert len(log.skipped) == 1  # the forged record, noted and never delivered
    tip = fake_github.ref(f"refs/assay/events/{BRIEF}")
    stored = json.loads(fake_github._git("show", f"{tip}:record.json"))
    assert stored["sig"].startswith("ed25519:")
    # An edit of the signed record (another actor) breaks its signature.
    edited = {k: v for k, v in stored.items() if k not in ("v", "kind")}
    edited["actor"] = "someone-else"
    RefLog(forge, f"refs/assay/events/{BRIEF}", kind="events").append(
        edited, author=Identity("github-actions[bot]", "bot@example.invalid")
    )
    assert [event.actor for event in EventLog(forge, BRIEF).read()] == ["maintainer"]


def test_a_signed_approval_copied_onto_another_briefs_log_does_not_count(
    fake_github: FakeGitHub, forge: GitHubForge
) -> None:
    issue = open_issue(fake_github)
    from assay.claims import ClaimStore

    store = ClaimStore(forge)
    claim = store.set_waiting(store.acquire(BRIEF, "example", lease_s=60), "approval")
    GitHubMirror(forge).claim(BRIEF, claim.record, issue=issue)
    comment(fake_github, issue, "/assay approve", "ghp-maintainer")
    collect_events(forge)
    tip = fake_github.ref(f"refs/assay/events/{BRIEF}")
    stored = json.loads(fake_github._git("show", f"{tip}:record.json"))
    copied = {k: v for k, v in stored.items() if k not in ("v", "kind")}
    RefLog(forge, "refs/assay/events/another-brief", kind="events").append(
        copied, author=Identity("github-actions[bot]", "bot@example.invalid")
    )
    other = EventLog(forge, "another-brief")
    assert other.read() == []
    assert "not signed by the gate key" in other.skipped[0]
