"""Issue briefs fixed by a writer: the text a person with write permission accepted.

An issue brief is the issue as it stood when a writer made it a brief, not whatever it
says when a desk or the gate reads it: the issue's author, or a desk job's token
(``issues: write``), could otherwise replace a failing row with ``run: 'true'``, or remove
the label ``approval`` that makes the brief wait for a maintainer. So the events job
(``assay github events``), which checks every actor through the API and holds the gate's
key, keeps one signed record per issue on ``refs/assay/github-issues/<N>``:

    {issue, digest, title, labels, body, writer, via, act_at, seen_at, at, sig}

``digest`` is the sha256 of the issue's *state*: its title, the labels that change what the
brief means (every label but ``assay`` and Assay's own ``assay:*``) and its body
(``state_digest``). Readers (``GitHubForge.extra_briefs``: the desk, status, board, sweeps,
the gate's ``load_brief``) build the brief from the *recorded* title, labels and body, never
the live ones, and count only records the trusted gate key signed; an issue without one is
that brief's ``BadInput`` (exit 65), and the others work.

What fixes a state (``via``), each once (a record names the act that made it, so the same
act never fixes a later state):

- ``label-<event id>``: the newest ``labeled: assay`` event of the issue's timeline (GitHub's
  own record: who, when) by a person with write permission, never a ``[bot]``, when nothing
  has changed the issue since (its ``updated_at`` is not after the label); or, when only the
  labels changed since the recorded act, the newest of those label changes, when a writer
  made every one of them (a desk removing ``approval`` is never one);
- ``comment-<id>``: a writer's ``/assay accept`` comment, read from the comment stream;
  with a digest prefix (``/assay accept 1a2b3c4d``, 8 hex or more) it fixes the state with
  that digest whatever came after; without one, only when nothing changed the issue after
  the comment.

``act_at`` is when GitHub stamped that act; ``seen_at`` the newest writer act on the issue
the events job has seen (a refused ``/assay accept`` included). A desk can push the ref back
to an older record a writer once signed; a merge checks GitHub's own record of the issue
(``rollback_problems``: its timeline and comments) and refuses when a writer acted after
``seen_at``.

GitHub stamps times in whole seconds, so an edit in the very second of a writer's act is
not told apart from one before it (the digest form has no such window). A later state that
no writer accepted is reported on the issue once (a comment naming its digest and how to
accept it), and ignored: the brief keeps the accepted title, labels and rows.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any

import assay.refs as refs
from assay.errors import AssayError, BadInput
from assay.evidence.keys import GateKey, PublicKey, split_signature
from assay.forge import Forge, RefLog
from assay.forge.records import RecordCodec
from assay.journal.redact import Redactor
from assay.plumbing import Identity

PIN_KIND = "github-issue-pin"
PIN_IDENTITY = Identity(name="assay github events", email="github-events@assay.invalid")
MAX_BODY = 256 * 1024
MAX_LABELS = 100
# The marker label: one constant, not a setting. The shipped workflows trigger on it, the
# events job fixes states by its label events, and the digest leaves it and Assay's own
# ``assay:*`` claim labels out; a marker set in one of these places and not the others
# would count Assay's claim labels as the brief's, or fix states by the wrong label.
BRIEF_LABEL = "assay"
_VIA = re.compile(r"(label|comment)-\d{1,20}")
_DIGEST = re.compile(r"[0-9a-f]{64}")
_STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
MIN_PREFIX = 8


def meaningful_labels(labels: Iterable[Any]) -> tuple[str, ...]:
    """The labels that change what an issue's brief means (``desk:``, ``priority:``,
    ``approval``, any other), sorted: all but the marker and Assay's own ``assay:*``."""
    names = {str(item["name"] if isinstance(item, dict) else item) for item in labels}
    return tuple(
        sorted(n for n in names if n != BRIEF_LABEL and not n.startswith(f"{BRIEF_LABEL}:"))
    )


def state_digest(title: str | None, labels: Iterable[Any], body: str | None) -> str:
    """The sha256 of an issue's state as Assay reads it: title, meaningful labels, body
    (CRLF folded to LF)."""
    state = {
        "title": str(title or "").strip(),
        "labels": list(meaningful_labels(labels)),
        "body": str(body or "").replace("\r\n", "\n"),
    }
    return hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()


def issue_digest(issue: Mapping[str, Any]) -> str:
    """``state_digest`` of a REST ``issue`` object as GitHub shows it now."""
    return state_digest(issue.get("title"), issue.get("labels") or [], issue.get("body"))


def pin_ref(number: int) -> str:
    return f"{refs.GITHUB_ISSUES}{int(number)}"


@dataclass(frozen=True)
class IssuePin:
    """One accepted state of issue ``issue``."""

    issue: int
    digest: str
    title: str
    labels: tuple[str, ...]
    body: str
    writer: str
    via: str
    act_at: str  # when GitHub stamped the act named by ``via``
    seen_at: str  # the newest writer act on the issue the events job has seen
    at: str
    sig: str = ""

    def payload(self) -> bytes:
        fields = {k: v for k, v in asdict(self).items() if k != "sig"}
        fields["labels"] = list(self.labels)
        return json.dumps({"kind": PIN_KIND, **fields}, sort_keys=True).encode()

    def signed(self, key: GateKey) -> IssuePin:
        return replace(self, sig=key.sign(self.payload()))

    def verified_by(self, key: PublicKey) -> bool:
        try:
            _, signature = split_signature(self.sig, source=pin_ref(self.issue))
        except AssayError:
            return False
        return key.verifies(signature, self.payload())

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "labels": list(self.labels)}


def _validate(record: dict[str, Any]) -> None:
    if not isinstance(record.get("issue"), int) or record["issue"] < 1:
        raise BadInput("field 'issue' must be an issue number")
    if not isinstance(record.get("digest"), str) or not _DIGEST.fullmatch(record["digest"]):
        raise BadInput("field 'digest' must be a sha256")
    if not isinstance(record.get("body"), str) or len(record["body"]) > MAX_BODY:
        raise BadInput(f"field 'body' must be text of at most {MAX_BODY} characters")
    labels = record.get("labels")
    if (
        not isinstance(labels, list)
        or len(labels) > MAX_LABELS
        or not all(isinstance(name, str) and len(name) <= 100 for name in labels)
    ):
        raise BadInput(f"field 'labels' must be a list of at most {MAX_LABELS} label names")
    if not isinstance(record.get("via"), str) or not _VIA.fullmatch(record["via"]):
        raise BadInput("field 'via' must be label-<id> or comment-<id>")
    for name in ("act_at", "seen_at"):
        if not isinstance(record.get(name), str) or not _STAMP.fullmatch(record[name]):
            raise BadInput(f"field {name!r} must be a GitHub timestamp")
    for name in ("title", "writer", "at", "sig"):
        if not isinstance(record.get(name), str) or len(record[name]) > 512:
            raise BadInput(f"field {name!r} must be a short string")


def pin_codec(number: int) -> RecordCodec:
    """The pin record's codec: ``record.json`` on ``refs/assay/github-issues/<number>``."""
    return RecordCodec(pin_ref(number), PIN_KIND, validate=_validate)


def _log(forge: Forge, number: int) -> RefLog:
    return RefLog.of(forge, pin_codec(number))


def _from_record(record: Mapping[str, Any]) -> IssuePin:
    fields = {name: record[name] for name in IssuePin.__dataclass_fields__}
    return IssuePin(**{**fields, "labels": tuple(record["labels"])})


def read_pins(
    forge: Forge, key: PublicKey | None, *, tips: Mapping[str, str] | None = None
) -> dict[int, IssuePin]:
    """Every issue's accepted state that ``key`` signed, open issues and closed ones, in
    one fetch (``tips``: the refs a fetch the caller made found); a record it did not sign,
    or one that does not decode, counts as none: that issue is not a brief."""
    found: dict[int, IssuePin] = {}
    if key is None:
        return found
    listed = forge.refresh(refs.GITHUB_ISSUES) if tips is None else tips
    for ref, tip in sorted(listed.items()):
        number = ref[len(refs.GITHUB_ISSUES) :]
        if not ref.startswith(refs.GITHUB_ISSUES) or not number.isdigit():
            continue
        try:
            record = _log(forge, int(number)).assume(tip).latest(fetch=False)
        except AssayError:
            continue
        if record is None:
            continue
        pin = _from_record(record)
        if pin.issue == int(number) and pin.verified_by(key):
            found[pin.issue] = pin
    return found


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _append(forge: Forge, pin: IssuePin, message: str) -> IssuePin:
    _log(forge, pin.issue).append(pin.to_json(), author=PIN_IDENTITY, message=message)
    return pin


def write_pin(
    forge: Forge,
    key: GateKey,
    *,
    issue: Mapping[str, Any],
    writer: str,
    via: str,
    act_at: str,
    seen_at: str,
    secrets: Iterable[str] = (),
) -> IssuePin:
    """Record (signed) that ``writer`` accepted the REST ``issue`` as it stands (title,
    meaningful labels, body) by the act ``via`` stamped ``act_at``, the events job having
    seen writer acts up to ``seen_at`` (never earlier than the last record said). The
    digest is the live state's (what readers compare); the recorded body has ``secrets``
    (the job's token, pasted into an issue by mistake) redacted, as every journal has."""
    number = int(issue["number"])
    text = Redactor(secrets).text(str(issue.get("body") or "").replace("\r\n", "\n"))
    pin = IssuePin(
        issue=number,
        digest=issue_digest(issue),
        title=str(issue.get("title") or "").strip(),
        labels=meaningful_labels(issue.get("labels") or []),
        body=text,
        writer=writer,
        via=via,
        act_at=act_at,
        seen_at=seen_at,
        at=_now(),
    ).signed(key)
    return _append(forge, pin, f"issue #{number}: text accepted by {writer}")


def mark_seen(forge: Forge, key: GateKey, pin: IssuePin, *, seen_at: str) -> IssuePin:
    """Re-sign ``pin`` saying the events job has seen every writer act on its issue up to
    ``seen_at`` (one that fixed nothing: a refused ``/assay accept``), so a record pushed
    back to before it is told apart at merge (``rollback_problems``)."""
    if seen_at <= pin.seen_at:
        return pin
    moved = replace(pin, seen_at=seen_at, at=_now()).signed(key)
    return _append(forge, moved, f"issue #{pin.issue}: writer acts seen up to {seen_at}")


def unaccepted_note(number: int, digest: str, pin: IssuePin | None) -> str:
    """The comment telling an issue its current state (title, labels, text) is not the
    accepted one (once each)."""
    marker = f"<!-- assay:issue-text issue={number} -->"  # one note per issue, edited
    if pin is None:
        kept = "No text of this issue has been accepted yet, so it is not a brief."
    else:
        kept = (
            f"Assay keeps working from the title, labels and text `{pin.writer}` accepted "
            f"(digest `{pin.digest[:12]}`)."
        )
    return (
        f"{marker}\n**Assay** · This issue's title, labels and text (digest `{digest[:12]}`) "
        "were not accepted by "
        f"anyone with write permission. {kept} A writer accepts this text by commenting "
        f"`/assay accept {digest[:12]}` (or by labelling the issue `assay` again).\n"
    )
