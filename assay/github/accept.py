"""The events job's side of ``assay.github.pins``: which issue states a writer accepted.

``collect_events`` runs this before it reads any command: each open ``assay`` issue whose
live state (title, meaningful labels, body) is not its accepted one, or that changed since
the last writer act the record has seen, has its timeline read (one conditional call, only
for those). The newest ``labeled: assay`` event by a writer fixes the state when nothing
changed the issue after it; label changes alone, every one by a writer, fix the new labels.
``/assay accept [DIGEST]`` comments go through ``accept``. Each accepted text's id is bound
to the issue that named it first (``bind``, ``assay.github.briefids``). At the end, each
issue whose live state is still not accepted is told so once per state, and each whose id
is another issue's once per accepted text (``report``).

Who counts as a writer is ``writer_refusal``, the collector's rule for every command: write
permission from the API, never a ``[bot]``. ``rollback_problems`` is the merge's check that
the record it reads is not an older one pushed back over a newer writer act.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from assay.errors import BadInput
from assay.evidence.keys import GateKey
from assay.evidence.trust import reader_key
from assay.github.api import GitHubApi
from assay.github.briefids import (
    NUMBERED,
    IdBinding,
    bind_ids,
    id_note,
    id_refusal,
    read_issue_records,
)
from assay.github.forge import GitHubForge
from assay.github.issues import brief_from_pin
from assay.github.pins import (
    BRIEF_LABEL,
    MIN_PREFIX,
    IssuePin,
    issue_digest,
    mark_seen,
    meaningful_labels,
    pin_ref,
    state_digest,
    unaccepted_note,
    write_pin,
)

_HEX = re.compile(r"[0-9a-f]+")


def writer_refusal(api: GitHubApi, actor: str) -> str | None:
    """Why ``actor``'s command or act is not honoured (None: a person with write
    permission, as the API says; a ``[bot]`` never is: desks act as one)."""
    if actor.endswith("[bot]"):
        return f"{actor} is a bot: desks act as one"
    if not api.can_write(actor):
        return f"{actor} has {api.permission(actor)} permission, not write"
    return None


@dataclass(frozen=True)
class Act:
    """One act on an issue that can fix its state: a label event or an accept comment."""

    via: str
    at: str
    actor: str
    change: str = ""  # a label event's ``labeled:NAME`` / ``unlabeled:NAME``


def _login(item: dict[str, Any], key: str) -> str:
    return str((item.get(key) or {}).get("login") or "")


def label_acts(timeline: Iterable[dict[str, Any]]) -> list[Act]:
    """The timeline's label events that matter to a brief (on ``assay`` or on a label
    that changes its meaning), oldest first."""
    acts = []
    for event in timeline:
        name = str((event.get("label") or {}).get("name") or "")
        if event.get("event") not in ("labeled", "unlabeled"):
            continue
        if name != BRIEF_LABEL and not meaningful_labels([name]):
            continue
        acts.append(
            Act(
                f"label-{int(event['id'])}",
                str(event.get("created_at")),
                _login(event, "actor"),
                change=f"{event['event']}:{name}",
            )
        )
    return acts


def accept_acts(comments: Iterable[dict[str, Any]]) -> list[Act]:
    """The ``/assay accept`` comments among an issue's comments, oldest first."""
    from assay.github.events import ACCEPT, parse_command  # events reads this module

    return [
        Act(f"comment-{int(c['id'])}", str(c.get("created_at")), _login(c, "user"))
        for c in comments
        if (parse_command(str(c.get("body") or "")) or ("",))[0] == ACCEPT
    ]


def rollback_problems(api: GitHubApi, pin: IssuePin) -> list[str]:
    """Why ``pin`` may be an older record pushed back over a newer one (empty: it is not).

    GitHub's own record of the issue (its timeline and comments: two conditional calls)
    names every act a writer made; the events job records each one it sees (``seen_at``,
    whether or not it fixed a state). A writer act after that is either one the events job
    has not read yet or one a desk rolled the record back past: fail closed either way."""
    number = pin.issue
    acts = label_acts(api.timeline(number)) + accept_acts(api.issue_comments(number))
    for act in sorted(acts, key=lambda a: a.at, reverse=True):
        if act.at <= pin.seen_at:
            break
        if writer_refusal(api, act.actor) is None:
            return [
                f"issue #{number}: {act.actor}'s act {act.via} at {act.at} is newer than the "
                f"accepted text's record on {pin_ref(number)} (it has seen "
                f"acts up to {pin.seen_at}): the record was rolled back, or the events job "
                "has not read it yet"
            ]
    return []


@dataclass
class Accepted:
    """What the acceptance pass did: states fixed (issue -> via), ids bound (id -> issue),
    notes posted, refusals."""

    fixed: dict[int, str] = field(default_factory=dict)
    bound: dict[str, int] = field(default_factory=dict)
    noted: list[int] = field(default_factory=list)  # told their text is not accepted
    id_noted: list[int] = field(default_factory=list)  # told their id is another issue's
    refused: list[str] = field(default_factory=list)


class TextAcceptance:
    """One events run's view of the open issues and their accepted states."""

    def __init__(
        self,
        forge: GitHubForge,
        *,
        signer: Callable[[], GateKey],
        remembered: dict[str, str],
    ) -> None:
        self.forge = forge
        self.api = forge.api
        self.signer = signer
        self.remembered = remembered  # the cursor's ignored map: notes posted, per issue
        self.issues = {int(i["number"]): i for i in self.api.open_issues(BRIEF_LABEL)}
        records = read_issue_records(forge, reader_key(forge))
        self.pins: dict[int, IssuePin] = records.pins
        self.bindings: dict[str, IdBinding] = records.bindings
        self.id_refused: dict[int, str] = {}  # open issue -> why its id is another's
        # (issue, accepted digest) -> the id that text declares (None: it does not parse)
        self._declared: dict[tuple[int, str], str | None] = {}
        self.done = Accepted()

    def writer(self, actor: str) -> str | None:
        return writer_refusal(self.api, actor)

    def _fix(self, number: int, act: Act) -> None:
        before = self.pins.get(number)
        self.pins[number] = write_pin(
            self.forge,
            self.signer(),
            issue=self.issues[number],
            writer=act.actor,
            via=act.via,
            act_at=act.at,
            seen_at=max(act.at, before.seen_at) if before is not None else act.at,
            secrets=self.forge.secrets,
        )
        self.done.fixed[number] = act.via

    def _seen(self, number: int, at: str) -> None:
        """A writer's act at ``at`` fixed nothing: the record says it was seen."""
        pin = self.pins.get(number)
        if pin is not None and at > pin.seen_at:
            self.pins[number] = mark_seen(self.forge, self.signer(), pin, seen_at=at)

    def _used(self, number: int, via: str) -> bool:
        pin = self.pins.get(number)
        return pin is not None and pin.via == via

    def from_labels(self) -> None:
        """Fix each changed issue's state by its writers' label events (see the module
        docstring), and record the newest writer act seen on each issue read."""
        for number, issue in sorted(self.issues.items()):
            pin = self.pins.get(number)
            current = pin is not None and pin.digest == issue_digest(issue)
            if current and pin is not None and str(issue.get("updated_at")) <= pin.seen_at:
                continue  # nothing happened since the last writer act the record saw
            acts = label_acts(self.api.timeline(number))
            if not acts:
                continue
            if not current:
                self._fix_from(number, issue, pin, acts)
            self._see_newest(number, acts)

    def _see_newest(self, number: int, acts: list[Act]) -> None:
        """Record the newest writer act among ``acts`` the record has not seen yet."""
        pin = self.pins.get(number)
        for act in reversed(acts):
            if pin is not None and act.at <= pin.seen_at:
                return
            if self.writer(act.actor) is None:
                self._seen(number, act.at)
                return

    def _fix_from(
        self, number: int, issue: dict[str, Any], pin: IssuePin | None, acts: list[Act]
    ) -> None:
        labelled = [a for a in acts if a.change == f"labeled:{BRIEF_LABEL}"]
        newest = labelled[-1] if labelled else None
        if (
            newest is not None
            and not self._used(number, newest.via)
            and newest.at >= str(issue.get("updated_at"))
        ):
            why = self.writer(newest.actor)
            if why is None:
                self._fix(number, newest)
                return
            self.done.refused.append(f"issue #{number}: labelled by {newest.actor}: {why}")
        if pin is None:
            return
        # Only the labels changed since the recorded act: every change a writer's.
        same_text = state_digest(issue.get("title"), pin.labels, issue.get("body")) == pin.digest
        since = [a for a in acts if a.at >= pin.act_at and a.via != pin.via]
        if not same_text or not since:
            return
        refused = [(a, why) for a in since if (why := self.writer(a.actor)) is not None]
        if refused:
            act, why = refused[-1]
            self.done.refused.append(f"issue #{number}: labels changed by {act.actor}: {why}")
            return
        self._fix(number, since[-1])

    def accept(self, number: int, comment: dict[str, Any], text: str) -> str | None:
        """A ``/assay accept [DIGEST]`` comment on issue ``number``; None when it fixed the
        state (or had already), else why not."""
        issue = self.issues.get(number)
        if issue is None:
            return f"issue #{number} is no open {BRIEF_LABEL!r} issue"
        act = Act(
            f"comment-{int(comment['id'])}", str(comment.get("created_at")), _login(comment, "user")
        )
        if self._used(number, act.via):
            return None
        why = self.writer(act.actor)
        if why is not None:
            return why
        why = self._accept_refusal(issue, comment, text)
        if why is not None:
            self._seen(number, act.at)
            return why
        self._fix(number, act)
        return None

    @staticmethod
    def _accept_refusal(issue: dict[str, Any], comment: dict[str, Any], text: str) -> str | None:
        digest = issue_digest(issue)
        prefix = text.split()[0].lower() if text.split() else ""
        if prefix:
            if len(prefix) < MIN_PREFIX or not _HEX.fullmatch(prefix):
                return f"{prefix!r} is not a digest prefix of {MIN_PREFIX} or more hex digits"
            if not digest.startswith(prefix):
                return f"the issue's text is {digest[:12]} now, not {prefix}"
        elif str(issue.get("updated_at")) > str(comment.get("created_at")):
            return "the issue changed after the comment: accept it by its digest"
        return None

    def bind(self) -> None:
        """Bind the id of each accepted text no record binds yet (``assay.github.briefids``:
        the lowest-numbered issue declaring it, closed ones included), and keep why each
        open issue whose id is another issue's is no brief. A closed issue already bound is
        not read again: its accepted text no longer changes."""
        bound = {binding.issue for binding in self.bindings.values()}
        declared: list[tuple[int, str]] = []
        for number, pin in sorted(self.pins.items()):
            if number not in self.issues and number in bound:
                continue
            seen = (number, pin.digest)
            brief = self._declared.get(seen)
            if seen not in self._declared:
                try:
                    brief = self._declared[seen] = brief_from_pin(pin).brief.id
                except BadInput:  # no brief, no id: that issue's error for its readers
                    self._declared[seen] = None
            if brief is not None:
                declared.append((number, brief))
        made = bind_ids(self.forge, self.signer, declared=declared, bindings=self.bindings)
        self.bindings.update(made)
        self.done.bound.update({brief: binding.issue for brief, binding in made.items()})
        self.id_refused = {
            number: why
            for number, brief in declared
            if number in self.issues
            and (brief in self.bindings or brief.startswith(NUMBERED))
            and (why := id_refusal(brief, number, self.bindings)) is not None
        }

    def report(self) -> None:
        """Tell each issue whose live state is not its accepted one, once per state, and
        each whose accepted id is another issue's, once per accepted state: one comment
        per issue and subject, edited in place."""
        for number, issue in sorted(self.issues.items()):
            digest = issue_digest(issue)
            pin = self.pins.get(number)
            key = f"github-issue-{number}"
            if pin is not None and pin.digest == digest:
                self.remembered.pop(key, None)
            elif self._tell(number, key, digest[:16], unaccepted_note(number, digest, pin)):
                self.done.noted.append(number)
            key = f"github-issue-id-{number}"
            why = self.id_refused.get(number)
            if why is None or pin is None:
                self.remembered.pop(key, None)
            elif self._tell(number, key, pin.digest[:16], id_note(number, why)):
                self.done.id_noted.append(number)

    def _tell(self, number: int, key: str, stamp: str, note: str) -> bool:
        """Post (or edit) ``note`` on issue ``number`` unless it was told ``stamp`` under
        ``key`` already (remembered in the events cursor); whether it was posted."""
        if self.remembered.get(key) == stamp:
            return False
        # One note per issue and subject, edited for each new state: found by its marker
        # (one conditional read), so a restarted cursor does not post it again either.
        found = self.api.find_comment(number, note)
        if found is None:
            self.api.create_comment(number, note)
        else:
            self.api.update_comment(int(found["id"]), note)
        self.remembered[key] = stamp
        return True
