"""Events from GitHub: ``/assay`` comments and pull request reviews, onto the events ref.

``/assay approve``, ``/assay reject``, ``/assay steer TEXT`` and ``/assay cancel`` (first line
of a comment on a brief's issue or pull request) and approving / changes-requested reviews
become events on ``refs/assay/events/<brief>``, the same log the embedded forge's
``assay approve|signal|cancel`` write, so the desk loop reads them the same way.

- Who: honoured only when the author has write permission, as the API says
  (``collaborators/{user}/permission``), never from the payload's ``author_association``.
  Anyone else's command is skipped and reported.
- Once: the event id is ``github-comment-<id>`` / ``github-review-<id>`` and is appended only
  when absent from the log, so a webhook delivered twice (or a poll that sees the same comment
  again) is consumed once. The duplicate check comes before the permission check: a repeat
  costs no REST call.
- Cost: one conditional call lists the repository's newest comments for every brief; a quiet
  poll is a free 304.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from assay.desks.records.events import EventLog
from assay.github.forge import GitHubForge
from assay.github.mirror import GitHubMirror, MirrorState

_COMMAND = re.compile(r"\A[ \t]*/assay[ \t]+(approve|reject|steer|cancel)\b[ \t]*([^\n]*)")
KINDS = {"approve": "approve", "reject": "reject", "steer": "signal", "cancel": "cancel"}
REVIEW_KINDS = {"APPROVED": "approve", "CHANGES_REQUESTED": "reject"}


@dataclass(frozen=True)
class Ignored:
    """A command that was not honoured, and why."""

    brief: str
    source: str
    actor: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {
            "brief": self.brief,
            "source": self.source,
            "actor": self.actor,
            "reason": self.reason,
        }


@dataclass
class EventsReport:
    """What one collection did: events appended, repeats skipped, commands ignored."""

    appended: list[dict[str, Any]] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    ignored: list[Ignored] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "appended": self.appended,
            "duplicates": self.duplicates,
            "ignored": [item.to_json() for item in self.ignored],
        }


def parse_command(body: str) -> tuple[str, str] | None:
    """``(event kind, text)`` of a ``/assay`` command comment, or None."""
    match = _COMMAND.match(body.replace("\r\n", "\n"))
    if match is None:
        return None
    verb, text = match[1], match[2].strip()
    if verb == "steer" and not text:
        return None  # steering without words says nothing
    return KINDS[verb], text


class _Collector:
    def __init__(self, forge: GitHubForge, report: EventsReport) -> None:
        self.forge = forge
        self.api = forge.api
        self.report = report
        self._seen: dict[str, set[str]] = {}

    def known(self, brief: str) -> set[str]:
        if brief not in self._seen:
            self._seen[brief] = {event.id for event in EventLog(self.forge, brief).read()}
        return self._seen[brief]

    def offer(
        self, brief: str, *, event_id: str, kind: str, text: str, actor: str, data: dict[str, Any]
    ) -> None:
        if event_id in self.known(brief):
            self.report.duplicates.append(event_id)
            return
        if not self.api.can_write(actor):
            permission = self.api.permission(actor)
            self.report.ignored.append(
                Ignored(brief, event_id, actor, f"{actor} has {permission} permission, not write")
            )
            return
        event = EventLog(self.forge, brief).append(
            kind, text=text, actor=actor, data=data, event_id=event_id
        )
        self.known(brief).add(event_id)
        self.report.appended.append({"brief": brief, **event.to_json()})


def collect_events(
    forge: GitHubForge,
    *,
    reviews_for: Iterable[str] = (),
    states: dict[str, MirrorState] | None = None,
) -> EventsReport:
    """Turn new ``/assay`` comments (and reviews on the pull requests of ``reviews_for``)
    into events on the forge; see the module docstring for who, once and cost."""
    report = EventsReport()
    states = GitHubMirror(forge).states() if states is None else states
    by_number: dict[int, str] = {}
    for brief, state in states.items():
        for number in (state.issue, state.pull):
            if number is not None:
                by_number[number] = brief
    collector = _Collector(forge, report)
    if by_number:
        for comment in reversed(forge.api.recent_comments()):  # oldest first
            parsed = parse_command(str(comment.get("body") or ""))
            number = int(str(comment.get("issue_url", "")).rsplit("/", 1)[-1] or 0)
            if parsed is None or number not in by_number:
                continue
            kind, text = parsed
            collector.offer(
                by_number[number],
                event_id=f"github-comment-{comment['id']}",
                kind=kind,
                text=text,
                actor=str(comment["user"]["login"]),
                data={"source": "github", "comment": comment["id"], "url": comment.get("html_url")},
            )
    for brief in reviews_for:
        mirrored = states.get(brief)
        if mirrored is None or mirrored.pull is None:
            continue
        for review in forge.api.reviews(mirrored.pull):
            verdict = REVIEW_KINDS.get(str(review.get("state")))
            if verdict is None or review.get("user") is None:
                continue
            collector.offer(
                brief,
                event_id=f"github-review-{review['id']}",
                kind=verdict,
                text=str(review.get("body") or ""),
                actor=str(review["user"]["login"]),
                data={"source": "github", "review": review["id"], "url": review.get("html_url")},
            )
    return report
