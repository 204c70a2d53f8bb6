"""Attack: a desk job pushes an event naming a maintainer onto an events ref on GitHub.

On GitHub any job with ``contents: write`` moves ``refs/assay/*``, so the events ref is no
proof of who sent an event. The events job (``assay github events``), which checks each
comment's author through the API, signs what it appends with the gate's key; every reader
there counts only events that key signed, and skips the rest with a note.
"""

from __future__ import annotations

import json

from assay.claims import ClaimStore
from assay.desks.records.events import EventLog
from assay.evidence.keys import gate_key
from assay.forge import RefLog
from assay.forgestate.source import read_snapshot
from assay.github.events import collect_events
from assay.github.forge import GitHubForge
from assay.github.mirror import GitHubMirror
from assay.plumbing import Identity
from tests.github import test_adapter
from tests.github.fake_github import FakeGitHub
from tests.github.test_adapter import BRIEF, comment, open_brief_issue, open_issue

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
    _push_as_desk_job(forge, BRIEF, record)


def _a_maintainer_approves(fake: FakeGitHub, forge: GitHubForge) -> None:
    """The brief waits for approval on its issue, and a maintainer comments /assay approve."""
    issue = open_brief_issue(fake, forge)
    store = ClaimStore(forge)
    claim = store.set_waiting(store.acquire(BRIEF, "example", lease_s=60), "approval")
    GitHubMirror(forge).claim(BRIEF, claim.record, issue=issue)
    comment(fake, issue, "/assay approve", "ghp-maintainer")


def _stored_approval(fake: FakeGitHub) -> dict[str, object]:
    """The events ref's last record as the events job stored it (signature included)."""
    tip = fake.ref(f"refs/assay/events/{BRIEF}")
    loaded: dict[str, object] = json.loads(fake._git("show", f"{tip}:record.json"))
    return loaded


def _push_as_desk_job(forge: GitHubForge, brief: str, record: dict[str, object]) -> None:
    """Append ``record`` as a desk job's token can, without any check of who sent it."""
    body = {k: v for k, v in record.items() if k not in ("v", "kind")}
    RefLog(forge, f"refs/assay/events/{brief}", kind="events").append(
        body, author=Identity("github-actions[bot]", "bot@example.invalid")
    )


def test_an_approval_pushed_by_a_desk_job_is_never_read_as_the_maintainers(
    fake_github: FakeGitHub, forge: GitHubForge
) -> None:
    open_issue(fake_github)
    _forge_an_approval(forge)
    log = EventLog(forge, BRIEF)
    assert log.read() == []
    assert "unsigned, and any job may write this ref" in log.skipped[0]
    # The board and the sweepers read events through the same decoder: no sweep wakes
    # the brief for it, and the board says why it was skipped.
    snapshot = read_snapshot(forge)
    assert snapshot.events.get(BRIEF, []) == []
    assert "unsigned, and any job may write this ref" in snapshot.event_notes[BRIEF][0]


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
    _a_maintainer_approves(fake_github, forge)
    _forge_an_approval(forge)  # a forged one beside the real one
    report = collect_events(forge)
    assert [event["actor"] for event in report.appended] == ["maintainer"]
    log = EventLog(forge, BRIEF)
    [approval] = log.read()
    assert approval.kind == "approve" and approval.id.startswith("github-comment-")
    assert len(log.skipped) == 1  # the forged record, noted and never delivered
    assert [e.actor for e in read_snapshot(forge).events[BRIEF]] == ["maintainer"]
    stored = _stored_approval(fake_github)
    assert str(stored["sig"]).startswith("ed25519:")
    # An edit of the signed record (another actor) breaks its signature.
    _push_as_desk_job(forge, BRIEF, {**stored, "actor": "someone-else"})
    assert [event.actor for event in EventLog(forge, BRIEF).read()] == ["maintainer"]


def test_a_signed_approval_copied_onto_another_briefs_log_does_not_count(
    fake_github: FakeGitHub, forge: GitHubForge
) -> None:
    _a_maintainer_approves(fake_github, forge)
    collect_events(forge)
    _push_as_desk_job(forge, "another-brief", _stored_approval(fake_github))
    other = EventLog(forge, "another-brief")
    assert other.read() == []
    assert "not signed by the gate key" in other.skipped[0]


def test_a_forged_mirror_record_cannot_send_an_approval_to_another_brief(
    fake_github: FakeGitHub, forge: GitHubForge
) -> None:
    """Which brief an issue belongs to comes from GitHub (the accepted issue briefs), not
    from the mirror records any job may push: one naming this issue for another brief
    gets nothing."""
    issue = open_brief_issue(fake_github, forge)
    RefLog(forge, "refs/assay/github/another-brief", kind="github-mirror").append(
        {"brief": "another-brief", "issue": issue}, author=Identity("github-actions[bot]", "b@x")
    )
    comment(fake_github, issue, "/assay approve", "ghp-maintainer")
    report = collect_events(forge)
    assert [(e["brief"], e["kind"]) for e in report.appended] == [(BRIEF, "approve")]
    assert EventLog(forge, "another-brief").read() == []
