"""Events from GitHub: ``/assay`` comments and pull request reviews, onto the events ref.

``/assay approve``, ``/assay reject``, ``/assay steer TEXT`` and ``/assay cancel`` (first line
of a comment on a brief's issue or pull request) and approving / changes-requested reviews
become events on ``refs/assay/events/<brief>``, the same log the embedded forge's
``assay approve|signal|cancel`` write, so the desk loop reads them the same way.

- Who: honoured only when the author has write permission, as the API says
  (``collaborators/{user}/permission``), never from the payload's ``author_association``,
  and is not a ``[bot]`` account: desks act as ``github-actions[bot]``, which has write
  permission, and a desk must never approve its own work. Anyone else's command is skipped
  and reported.
- Once: the event id is ``github-comment-<id>`` / ``github-review-<id>`` and is appended only
  when absent from the log, so a webhook delivered twice (or a poll that sees the same comment
  again) is consumed once. The duplicate check comes before the permission check: a repeat
  costs no REST call.
- Cursor: comments are read since the last one seen (``since`` = the newest ``updated_at``
  read, kept in one record on ``refs/assay/github-events/cursor``), oldest first, every page:
  no window, so a hundred comments after an approval cannot push it out of sight. The
  record is signed with the job's key: one it did not sign (a desk moved ``since`` forward,
  or put a maintainer's ``/assay reject`` among the refused) is not taken, and the job
  reads every comment again from the beginning (``read_cursor``). The query
  starts ``OVERLAP_S`` before the cursor, so a comment stamped in the same second as the last
  one read, or listed late by GitHub, is still read (a re-read costs nothing: see below).
- Reviews: read on the pull requests of waiting briefs and of every brief whose pull
  request changed since the last read (``pulls_since`` in the cursor: a review changes its
  pull request's ``updated_at``), so ``assay github merge`` finds every writer's review on
  the log, or refuses (``unrecorded_answers``).
- Cost: one conditional call per page of comments updated since the cursor, for every brief;
  a quiet poll is a free 304. A refused command is remembered in the cursor with the stamp
  it had (its ``updated_at``), so re-reading it costs no second permission check; an edit
  changes the stamp and is checked again.
- Commands end at a word boundary that excludes ``-``: ``/assay approve-not-really`` is not
  ``approve``.
- Signed: every event this job appends is signed with the gate's key (the repository secret
  ``ASSAY_EVIDENCE_KEY``, handed to this job as a file), and readers on GitHub count only
  events the vouched key signed (``assay.desks.records.events``): a desk job can push a
  record naming a maintainer onto any events ref, but not sign it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import assay.refs as refs
from assay.desks.records.events import EventLog
from assay.errors import AssayError, BadInput
from assay.evidence.keys import GateKey, PublicKey, gate_key, split_signature
from assay.forge import RefLog
from assay.forge.records import RecordCodec
from assay.github.accept import TextAcceptance, writer_refusal
from assay.github.briefids import IdBinding
from assay.github.forge import GitHubForge
from assay.github.pins import IssuePin
from assay.ids import check_id
from assay.plumbing import Identity

# The verb ends where a word would: not before a letter, digit, ``_`` or ``-``.
_COMMAND = re.compile(
    r"\A[ \t]*/assay[ \t]+(approve|reject|steer|cancel|accept)(?![\w-])[ \t]*([^\n]*)"
)
KINDS = {"approve": "approve", "reject": "reject", "steer": "signal", "cancel": "cancel"}
ACCEPT = "accept"  # ``/assay accept [DIGEST]``: a writer accepts an issue's text (no event)
REVIEW_KINDS = {"APPROVED": "approve", "CHANGES_REQUESTED": "reject"}


CURSOR_KIND = "github-events-cursor"
CURSOR_IDENTITY = Identity(name="assay github events", email="github-events@assay.invalid")
MAX_REMEMBERED = 2000  # refused reviews kept (refused comments are pruned by the cursor)
OVERLAP_S = 60
_STAMP_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # GitHub's: whole seconds, so stamps sort as text
_STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def _rewound(stamp: str | None) -> str | None:
    """``stamp`` less ``OVERLAP_S``: where the next read of comments starts."""
    if stamp is None:
        return None
    earlier = datetime.strptime(stamp, _STAMP_FORMAT) - timedelta(seconds=OVERLAP_S)
    return earlier.strftime(_STAMP_FORMAT)


@dataclass
class EventsCursor:
    """How far ``collect_events`` has read: the newest comment ``updated_at`` seen, and the
    commands refused so far (event id -> the stamp it had), so none is checked twice."""

    since: str | None = None
    ignored: dict[str, str] = field(default_factory=dict)
    # The newest pull request ``updated_at`` the last read of reviews listed: reviews are
    # read on the pull requests changed since (None: on every one).
    pulls_since: str | None = None

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {"since": self.since, "ignored": dict(self.ignored)}
        if self.pulls_since is not None:  # absent from cursors written before it existed
            found["pulls_since"] = self.pulls_since
        return found

    def payload(self) -> bytes:
        """The bytes the events job signs: a desk that moved ``since`` forward or added a
        maintainer's comment to ``ignored`` would skip a ``/assay reject`` silently."""
        return json.dumps({"kind": CURSOR_KIND, **self.to_json()}, sort_keys=True).encode()

    def signed_by(self, key: PublicKey, sig: str) -> bool:
        try:
            _, signature = split_signature(sig, source=refs.GITHUB_EVENTS_CURSOR)
        except AssayError:
            return False
        return key.verifies(signature, self.payload())

    def pruned(self) -> EventsCursor:
        """Forget refused comments older than the next read starts: they are never read
        again unless edited, and an edit changes their stamp. Refused reviews are kept,
        newest last."""
        since = _rewound(self.since) or ""
        kept = {
            key: stamp
            for key, stamp in self.ignored.items()
            if not key.startswith("github-comment-") or stamp >= since
        }
        if len(kept) > MAX_REMEMBERED:
            kept = dict(list(kept.items())[-MAX_REMEMBERED:])
        return EventsCursor(since=self.since, ignored=kept, pulls_since=self.pulls_since)


def _validate_cursor(record: dict[str, Any]) -> None:
    for name in ("since", "pulls_since"):
        stamp = record.get(name)
        if stamp is not None and (not isinstance(stamp, str) or not _STAMP.fullmatch(stamp)):
            raise BadInput(f"field {name!r} must be a GitHub timestamp or null")
    ignored = record.get("ignored")
    if not isinstance(ignored, dict) or not all(
        isinstance(key, str) and isinstance(value, str) and len(key) <= 64 and len(value) <= 64
        for key, value in ignored.items()
    ):
        raise BadInput("field 'ignored' must map event ids to timestamps")
    if not isinstance(record.get("sig", ""), str):
        raise BadInput("field 'sig' must be a signature")


def cursor_codec() -> RecordCodec:
    """The events cursor's codec: ``record.json`` on ``refs/assay/github-events/cursor``."""
    return RecordCodec(refs.GITHUB_EVENTS_CURSOR, CURSOR_KIND, validate=_validate_cursor)


def _cursor_log(forge: GitHubForge) -> RefLog:
    return RefLog.of(forge, cursor_codec())


def read_cursor(forge: GitHubForge, key: PublicKey) -> tuple[EventsCursor, str | None]:
    """The events cursor on the forge, and why it was not taken (None: it was).

    Only a cursor this job signed (``key``) is taken; any other (unsigned, signed by
    another key, undecodable) restarts from the beginning, every comment read again and
    every refusal checked again: slower once, never a skipped command. Before the first
    collection there is no cursor, and that is the same start."""
    try:
        record = _cursor_log(forge).latest()
    except AssayError as bad:
        return EventsCursor(), f"{refs.GITHUB_EVENTS_CURSOR} does not read ({bad.message})"
    if record is None:
        return EventsCursor(), None
    cursor = EventsCursor(
        since=record.get("since"),
        ignored=dict(record["ignored"]),
        pulls_since=record.get("pulls_since"),
    )
    if not cursor.signed_by(key, str(record.get("sig") or "")):
        return EventsCursor(), (
            f"{refs.GITHUB_EVENTS_CURSOR} is not signed by this job's key: every comment "
            "is read again from the beginning"
        )
    return cursor, None


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
    remembered: list[str] = field(default_factory=list)  # refused before: not checked again
    since: str | None = None  # the cursor after this collection
    accepted: dict[int, str] = field(default_factory=dict)  # issue -> the act fixing its text
    bound: dict[str, int] = field(default_factory=dict)  # brief id -> the issue it is bound to
    noted: list[int] = field(default_factory=list)  # issues told their text is not accepted
    id_noted: list[int] = field(default_factory=list)  # issues told their id is another's
    restarted: str | None = None  # why the cursor was not taken (read from the beginning)

    def to_json(self) -> dict[str, Any]:
        return {
            "appended": self.appended,
            "duplicates": self.duplicates,
            "ignored": [item.to_json() for item in self.ignored],
            "remembered": self.remembered,
            "since": self.since,
            "accepted": {str(number): via for number, via in self.accepted.items()},
            "bound": self.bound,
            "noted": self.noted,
            "id_noted": self.id_noted,
            "restarted": self.restarted,
        }


def parse_command(body: str) -> tuple[str, str] | None:
    """``(event kind, text)`` of a ``/assay`` command comment, or None."""
    match = _COMMAND.match(body.replace("\r\n", "\n"))
    if match is None:
        return None
    verb, text = match[1], match[2].strip()
    if verb == "steer" and not text:
        return None  # steering without words says nothing
    return KINDS.get(verb, verb), text


class _Collector:
    def __init__(self, forge: GitHubForge, report: EventsReport, cursor: EventsCursor) -> None:
        self.forge = forge
        self.api = forge.api
        self.report = report
        self.cursor = cursor
        self._seen: dict[str, set[str]] = {}
        # The events this job writes are signed with the gate's key, read once and only
        # when an event is written: readers trust no event a desk job could have pushed.
        self._signer: GateKey | None = None

    def signer(self) -> GateKey:
        if self._signer is None:
            self._signer = gate_key(create=True)
        assert self._signer is not None  # created when missing
        return self._signer

    def refusal(self, actor: str) -> str | None:
        """Why ``actor``'s command is not honoured (None: a person with write permission)."""
        return writer_refusal(self.api, actor)

    def known(self, brief: str) -> set[str]:
        if brief not in self._seen:
            self._seen[brief] = {event.id for event in EventLog(self.forge, brief).read()}
        return self._seen[brief]

    def offer(
        self,
        brief: str,
        *,
        event_id: str,
        stamp: str,
        kind: str,
        text: str,
        actor: str,
        data: dict[str, Any],
    ) -> None:
        if event_id in self.known(brief):
            self.report.duplicates.append(event_id)
            return
        if stamp and self.cursor.ignored.get(event_id) == stamp:
            self.report.remembered.append(event_id)
            return
        why = self.refusal(actor)
        if why is not None:
            self.report.ignored.append(Ignored(brief, event_id, actor, why))
            if stamp:
                self.cursor.ignored[event_id] = stamp
            return
        event = EventLog(self.forge, brief).append(
            kind, text=text, actor=actor, data=data, event_id=event_id, signer=self.signer()
        )
        self.known(brief).add(event_id)
        self.report.appended.append({"brief": brief, **event.to_json()})


def brief_numbers(
    forge: GitHubForge, pins: Mapping[int, IssuePin], bindings: Mapping[str, IdBinding]
) -> tuple[dict[int, str], dict[str, dict[str, Any]]]:
    """Which brief each issue and pull request number belongs to, as GitHub itself says:
    an issue brief's number (``load_issue_briefs``), and the open pull request from
    ``assay/<brief>``. Never from the mirror records, which any job may push: a forged one
    would send a maintainer's ``/assay approve`` to another brief. Two conditional calls,
    free when nothing changed. Returns ``(brief by number, open pull request by brief)``."""
    from assay.github.issues import load_issue_briefs

    by_number: dict[int, str] = {}
    pulls: dict[str, dict[str, Any]] = {}
    for brief, found in load_issue_briefs(forge.api, pins=pins, bindings=bindings).briefs.items():
        by_number[found.number] = brief
    for pull in forge.api.open_pulls():
        head = str((pull.get("head") or {}).get("ref") or "")
        if not head.startswith(refs.BRANCH_PREFIX):
            continue
        try:
            brief = check_id(head[len(refs.BRANCH_PREFIX) :])
        except AssayError:
            continue  # a branch under assay/ that names no brief
        by_number[int(pull["number"])] = brief
        pulls[brief] = pull
    return by_number, pulls


ANSWERS = ("approve", "reject")


def unrecorded_answers(
    forge: GitHubForge, brief: str, *, issue: int | None, since: str, pull: int | None
) -> list[str]:
    """Writers' answers on the brief's issue (made at or after ``since``, when it became a
    brief) and pull request, newer than the newest one its events ref holds, as GitHub
    itself lists them (a conditional read each): ``/assay approve`` and ``/assay reject``
    comments, and the pull request's approving and changes-requested reviews.

    The gate signs the events it read; a desk job that pushed the ref back past a reject
    the events job had just appended, before the gate read it, leaves a signed log that
    lacks it. GitHub's comments and reviews are the record a desk cannot rewind. An answer
    lost that way and followed by a newer one the log holds is superseded: the
    maintainer's next answer is what unblocks the brief."""
    recorded = {event.id for event in EventLog(forge, brief).read()}
    answers: list[tuple[str, str, str, str, str]] = []  # (at, event id, actor, verb, where)
    for number, after in ((issue, since), (pull, "")):
        if number is None:
            continue
        for comment in forge.api.issue_comments(number):
            parsed = parse_command(str(comment.get("body") or ""))
            at = str(comment.get("created_at"))
            if parsed is None or parsed[0] not in ANSWERS or at < after:
                continue
            actor = _login(comment)
            answers.append(
                (at, f"github-comment-{comment['id']}", actor, f"/assay {parsed[0]}", f"#{number}")
            )
    if pull is not None:
        for review in forge.api.reviews(pull):
            verdict = REVIEW_KINDS.get(str(review.get("state")))
            if verdict is None or review.get("user") is None:
                continue
            at = str(review.get("submitted_at"))
            what = "approving review" if verdict == "approve" else "changes-requested review"
            answers.append((at, f"github-review-{review['id']}", _login(review), what, f"#{pull}"))
    missing: list[str] = []
    for _, event_id, actor, what, where in sorted(answers, reverse=True):
        if event_id in recorded:
            break
        if writer_refusal(forge.api, actor) is None:
            missing.append(
                f"{actor}'s {what} ({event_id}) on {where} is not on "
                f"{refs.events_ref(brief)}: the events ref was rolled back, or the events "
                "job has not read it yet"
            )
    return missing


def _login(item: Mapping[str, Any]) -> str:
    return str((item.get("user") or {}).get("login") or "")


def _changed_pulls(cursor: EventsCursor, pulls: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """The briefs whose open pull request changed since the cursor's last read of reviews
    (every one on a first read, ``OVERLAP_S`` early as for comments); ``pulls_since``
    moves to the newest ``updated_at`` listed."""
    read_from = _rewound(cursor.pulls_since)
    stamps = {brief: str(pull.get("updated_at") or "") for brief, pull in pulls.items()}
    newest = max((at for at in stamps.values() if _STAMP.fullmatch(at)), default=None)
    if newest is not None and (cursor.pulls_since is None or newest > cursor.pulls_since):
        cursor.pulls_since = newest
    return {brief for brief, at in stamps.items() if read_from is None or at >= read_from}


def _accept(
    texts: TextAcceptance, report: EventsReport, number: int, comment: dict[str, Any], text: str
) -> None:
    why = texts.accept(number, comment, text)
    if why is not None:
        actor = str((comment.get("user") or {}).get("login") or "")
        report.ignored.append(
            Ignored(f"issue #{number}", f"github-comment-{comment['id']}", actor, why)
        )


def collect_events(
    forge: GitHubForge, *, reviews_for: Iterable[str] = (), reviews: bool = True
) -> EventsReport:
    """Turn new ``/assay`` comments and reviews into events on the forge; see the module
    docstring for who, once and cost. Reviews are read on the pull requests of
    ``reviews_for`` and, with ``reviews``, on every open pull request of a brief that
    changed since the cursor (a review changes its pull request's ``updated_at``), so the
    answers ``assay github merge`` checks for are on the log."""
    report = EventsReport()
    collector = _Collector(forge, report, EventsCursor())
    before, report.restarted = read_cursor(forge, collector.signer().public)
    cursor = collector.cursor = EventsCursor(
        since=before.since, ignored=dict(before.ignored), pulls_since=before.pulls_since
    )
    texts = TextAcceptance(forge, signer=collector.signer, remembered=cursor.ignored)
    texts.from_labels()
    texts.bind()
    by_number, pulls = brief_numbers(forge, texts.pins, texts.bindings)
    if by_number or texts.issues:
        for comment in forge.api.comments_since(_rewound(cursor.since)):  # oldest first
            stamp = str(comment.get("updated_at") or "")
            if _STAMP.fullmatch(stamp) and (cursor.since is None or stamp > cursor.since):
                cursor.since = stamp
            parsed = parse_command(str(comment.get("body") or ""))
            number = int(str(comment.get("issue_url", "")).rsplit("/", 1)[-1] or 0)
            if parsed is not None and parsed[0] == ACCEPT:
                _accept(texts, report, number, comment, parsed[1])
                continue
            if parsed is None or number not in by_number:
                continue
            kind, text = parsed
            collector.offer(
                by_number[number],
                event_id=f"github-comment-{comment['id']}",
                stamp=stamp,
                kind=kind,
                text=text,
                actor=str(comment["user"]["login"]),
                data={"source": "github", "comment": comment["id"], "url": comment.get("html_url")},
            )
    changed = _changed_pulls(cursor, pulls) if reviews else set()
    for brief in sorted(changed | set(reviews_for)):
        if brief not in pulls:
            continue
        for review in forge.api.reviews(int(pulls[brief]["number"])):
            verdict = REVIEW_KINDS.get(str(review.get("state")))
            if verdict is None or review.get("user") is None:
                continue
            collector.offer(
                brief,
                event_id=f"github-review-{review['id']}",
                stamp=str(review.get("submitted_at") or ""),
                kind=verdict,
                text=str(review.get("body") or ""),
                actor=_login(review),
                data={"source": "github", "review": review["id"], "url": review.get("html_url")},
            )
    texts.bind()  # the ids of texts accepted by a comment just now
    texts.report()
    report.accepted = dict(texts.done.fixed)
    report.bound = dict(texts.done.bound)
    report.noted = list(texts.done.noted)
    report.id_noted = list(texts.done.id_noted)
    after = cursor.pruned()
    if after != before or report.restarted is not None:
        _cursor_log(forge).append(
            {**after.to_json(), "sig": collector.signer().sign(after.payload())},
            author=CURSOR_IDENTITY,
            message=f"github events: read comments up to {after.since}",
        )
    report.since = after.since
    return report
