"""Issue briefs fixed by a writer: the text a person with write permission accepted.

An issue brief is the issue as it stood when a writer made it a brief, not whatever its
body says when a desk or the gate reads it: the issue's author, or a desk job's token
(``issues: write``), could otherwise replace a failing row with ``run: 'true'``. So the
events job (``assay github events``), which checks every actor through the API and holds
the gate's key, keeps one signed record per issue on ``refs/assay/github-issues/<N>``:

    {issue, digest (sha256 of the body), body, writer, via, at, sig}

Readers (``GitHubForge.extra_briefs``: the desk, status, board, sweeps, the gate's
``load_brief``) build the brief from the *recorded* body, never the live one, and count
only records the trusted gate key signed; an issue without one is that brief's
``BadInput`` (exit 65), and the others work.

What fixes a text (``via``), each once (a record names the act that made it, so the same
act never fixes a later text):

- ``label-<event id>``: the newest ``labeled: assay`` event of the issue's timeline (GitHub's
  own record: who, when) by a person with write permission, never a ``[bot]``, when nothing
  has changed the issue since (its ``updated_at`` is not after the label);
- ``comment-<id>``: a writer's ``/assay accept`` comment, read from the comment stream;
  with a digest prefix (``/assay accept 1a2b3c4d``, 8 hex or more) it fixes the text with
  that digest whatever came after; without one, only when nothing changed the issue after
  the comment.

GitHub stamps times in whole seconds, so an edit in the very second of a writer's act is
not told apart from one before it (the digest form has no such window). A later text that
no writer accepted is reported on the issue once (a comment naming its digest and how to
accept it), and ignored: the brief keeps the accepted rows.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
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
_VIA = re.compile(r"(label|comment)-\d{1,20}")
_DIGEST = re.compile(r"[0-9a-f]{64}")
MIN_PREFIX = 8


def body_digest(body: str | None) -> str:
    """The sha256 of an issue body as Assay reads it (CRLF folded to LF)."""
    return hashlib.sha256(str(body or "").replace("\r\n", "\n").encode()).hexdigest()


def pin_ref(number: int) -> str:
    return f"{refs.GITHUB_ISSUES}{int(number)}"


@dataclass(frozen=True)
class IssuePin:
    """One accepted text of issue ``issue``."""

    issue: int
    digest: str
    body: str
    writer: str
    via: str
    at: str
    sig: str = ""

    def payload(self) -> bytes:
        fields = {k: v for k, v in asdict(self).items() if k != "sig"}
        return json.dumps({"kind": PIN_KIND, **fields}, sort_keys=True).encode()

    def signed(self, key: GateKey) -> IssuePin:
        return IssuePin(**{**asdict(self), "sig": key.sign(self.payload())})

    def verified_by(self, key: PublicKey) -> bool:
        try:
            _, signature = split_signature(self.sig, source=pin_ref(self.issue))
        except AssayError:
            return False
        return key.verifies(signature, self.payload())


def _validate(record: dict[str, Any]) -> None:
    if not isinstance(record.get("issue"), int) or record["issue"] < 1:
        raise BadInput("field 'issue' must be an issue number")
    if not isinstance(record.get("digest"), str) or not _DIGEST.fullmatch(record["digest"]):
        raise BadInput("field 'digest' must be a sha256")
    if not isinstance(record.get("body"), str) or len(record["body"]) > MAX_BODY:
        raise BadInput(f"field 'body' must be text of at most {MAX_BODY} characters")
    if not isinstance(record.get("via"), str) or not _VIA.fullmatch(record["via"]):
        raise BadInput("field 'via' must be label-<id> or comment-<id>")
    for name in ("writer", "at", "sig"):
        if not isinstance(record.get(name), str) or len(record[name]) > 512:
            raise BadInput(f"field {name!r} must be a short string")


def pin_codec(number: int) -> RecordCodec:
    """The pin record's codec: ``record.json`` on ``refs/assay/github-issues/<number>``."""
    return RecordCodec(pin_ref(number), PIN_KIND, validate=_validate)


def _log(forge: Forge, number: int) -> RefLog:
    return RefLog.of(forge, pin_codec(number))


def _from_record(record: Mapping[str, Any]) -> IssuePin:
    return IssuePin(**{name: record[name] for name in IssuePin.__dataclass_fields__})


def read_pins(forge: Forge, key: PublicKey | None) -> dict[int, IssuePin]:
    """Every issue's accepted text that ``key`` signed, in one fetch (a record it did not
    sign, or one that does not decode, counts as none: that issue is not a brief)."""
    found: dict[int, IssuePin] = {}
    if key is None:
        return found
    for ref in sorted(forge.refresh(refs.GITHUB_ISSUES)):
        number = ref[len(refs.GITHUB_ISSUES) :]
        if not number.isdigit():
            continue
        try:
            record = _log(forge, int(number)).latest(fetch=False)
        except AssayError:
            continue
        if record is None:
            continue
        pin = _from_record(record)
        if pin.issue == int(number) and pin.verified_by(key):
            found[pin.issue] = pin
    return found


def write_pin(
    forge: Forge,
    key: GateKey,
    *,
    issue: int,
    body: str,
    writer: str,
    via: str,
    secrets: Iterable[str] = (),
) -> IssuePin:
    """Record (signed) that ``writer`` accepted ``body`` as issue ``issue``'s brief. The
    digest is the live body's (what readers compare); the recorded body has ``secrets``
    (the job's token, pasted into an issue by mistake) redacted, as every journal has."""
    at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    text = Redactor(secrets).text(str(body or "").replace("\r\n", "\n"))
    pin = IssuePin(issue, body_digest(body), text, writer, via, at).signed(key)
    _log(forge, issue).append(
        asdict(pin), author=PIN_IDENTITY, message=f"issue #{issue}: text accepted by {writer}"
    )
    return pin


def unaccepted_note(number: int, digest: str, pin: IssuePin | None) -> str:
    """The comment telling an issue its current text is not the accepted one (once each)."""
    marker = f"<!-- assay:issue-text issue={number} digest={digest[:16]} -->"
    if pin is None:
        kept = "No text of this issue has been accepted yet, so it is not a brief."
    else:
        kept = (
            f"Assay keeps working from the text `{pin.writer}` accepted "
            f"(digest `{pin.digest[:12]}`)."
        )
    return (
        f"{marker}\n**Assay** · This issue's text (digest `{digest[:12]}`) was not accepted by "
        f"anyone with write permission. {kept} A writer accepts this text by commenting "
        f"`/assay accept {digest[:12]}` (or by labelling the issue `assay` again).\n"
    )
