"""The events job's side of ``assay.github.pins``: which issue texts a writer accepted.

``collect_events`` runs this before it reads any command: each open ``assay`` issue whose
live text is not its accepted one has its timeline read (one call, only for those), and
the newest ``labeled: assay`` event by a writer fixes the text when nothing changed the
issue after it. ``/assay accept [DIGEST]`` comments go through ``accept``. At the end, each
issue whose live text is still not accepted is told so once per text (``report``).
Who counts as a writer is the collector's rule for every command: write permission from the
API, never a ``[bot]``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from assay.evidence.keys import GateKey
from assay.evidence.trust import reader_key
from assay.github.forge import GitHubForge
from assay.github.pins import (
    MIN_PREFIX,
    IssuePin,
    body_digest,
    read_pins,
    unaccepted_note,
    write_pin,
)

BRIEF_LABEL = "assay"
_HEX = re.compile(r"[0-9a-f]+")


@dataclass
class Accepted:
    """What the acceptance pass did: texts fixed (issue -> via), notes posted, refusals."""

    fixed: dict[int, str] = field(default_factory=dict)
    noted: list[int] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


class TextAcceptance:
    """One events run's view of the open issues and their accepted texts."""

    def __init__(
        self,
        forge: GitHubForge,
        *,
        writer: Callable[[str], str | None],
        signer: Callable[[], GateKey],
        remembered: dict[str, str],
    ) -> None:
        self.forge = forge
        self.api = forge.api
        self.writer = writer  # login -> None when a writer, else why not
        self.signer = signer
        self.remembered = remembered  # the cursor's ignored map: notes posted, per issue
        self.issues = {int(i["number"]): i for i in self.api.open_issues(BRIEF_LABEL)}
        self.pins: dict[int, IssuePin] = read_pins(forge, reader_key(forge))
        self.done = Accepted()

    def _fix(self, number: int, *, writer: str, via: str, body: str) -> None:
        self.pins[number] = write_pin(
            self.forge,
            self.signer(),
            issue=number,
            body=body,
            writer=writer,
            via=via,
            secrets=self.forge.secrets,
        )
        self.done.fixed[number] = via

    def _used(self, number: int, via: str) -> bool:
        pin = self.pins.get(number)
        return pin is not None and pin.via == via

    def from_labels(self) -> None:
        """Fix each changed issue's text by its newest writer's label, when it is the
        issue's last change (``updated_at`` not after it)."""
        for number, issue in sorted(self.issues.items()):
            body = str(issue.get("body") or "")
            pin = self.pins.get(number)
            if pin is not None and pin.digest == body_digest(body):
                continue
            labels = [
                event
                for event in self.api.timeline(number)
                if event.get("event") == "labeled"
                and str((event.get("label") or {}).get("name")) == BRIEF_LABEL
            ]
            if not labels:
                continue
            newest = labels[-1]
            via = f"label-{int(newest['id'])}"
            actor = str((newest.get("actor") or {}).get("login") or "")
            if self._used(number, via) or str(newest.get("created_at")) < str(
                issue.get("updated_at")
            ):
                continue  # that label fixed an earlier text, or the issue changed since
            why = self.writer(actor)
            if why is not None:
                self.done.refused.append(f"issue #{number}: labelled by {actor}: {why}")
                continue
            self._fix(number, writer=actor, via=via, body=body)

    def accept(self, number: int, comment: dict[str, Any], text: str) -> str | None:
        """A ``/assay accept [DIGEST]`` comment on issue ``number``; None when it fixed the
        text (or had already), else why not."""
        issue = self.issues.get(number)
        if issue is None:
            return f"issue #{number} is no open {BRIEF_LABEL!r} issue"
        via = f"comment-{int(comment['id'])}"
        if self._used(number, via):
            return None
        actor = str((comment.get("user") or {}).get("login") or "")
        why = self.writer(actor)
        if why is not None:
            return why
        body = str(issue.get("body") or "")
        digest = body_digest(body)
        prefix = text.split()[0].lower() if text.split() else ""
        if prefix:
            if len(prefix) < MIN_PREFIX or not _HEX.fullmatch(prefix):
                return f"{prefix!r} is not a digest prefix of {MIN_PREFIX} or more hex digits"
            if not digest.startswith(prefix):
                return f"the issue's text is {digest[:12]} now, not {prefix}"
        elif str(issue.get("updated_at")) > str(comment.get("created_at")):
            return "the issue changed after the comment: accept it by its digest"
        self._fix(number, writer=actor, via=via, body=body)
        return None

    def report(self) -> None:
        """Tell each issue whose live text is not its accepted one, once per text."""
        for number, issue in sorted(self.issues.items()):
            digest = body_digest(issue.get("body"))
            pin = self.pins.get(number)
            key = f"github-issue-{number}"
            if pin is not None and pin.digest == digest:
                self.remembered.pop(key, None)
                continue
            if self.remembered.get(key) == digest[:16]:
                continue
            self.api.create_comment(number, unaccepted_note(number, digest, pin))
            self.remembered[key] = digest[:16]
            self.done.noted.append(number)
