"""Brief ids bound to their issues: ``refs/assay/github-ids/<id>``, one signed record each.

Everything Assay keeps about a brief is keyed by its id alone: its claim, branch, journal,
events, evidence and mirror record. An issue that took an id another issue had used would
inherit all of it (a maintainer's approval on the events ref among them). So an id belongs
to the first issue whose accepted text (``assay.github.pins``) declared it, for good, open
or closed; any later issue declaring it is that issue's ``BadInput`` (exit 65 for it alone),
and the issue is told once.

The binding is a record, not a rule re-applied to whatever issues are open: the first
issue closed, the next one naming its id would otherwise be the oldest again. The events
job (``assay github events``), which writes the accepted texts, binds each id no record
binds yet to the lowest-numbered issue among every accepted text that declares it (closed
issues' included: their records stay), in one push, and never moves a binding:

    {brief, issue, at, sig}      kind github-id-binding, signed by the gate's key

An id ``issue-<M>`` is only ever bound to issue #M. Readers (``load_issue_briefs``: the
desk, status, board, sweeps, the gate) count an issue brief only under an id bound to that
issue, and only records the trusted key signed. A desk job can delete or rewrite the ref
(custom refs are not protected on GitHub): the id is then nobody's, so every issue naming
it is refused, until the events job binds it again from the accepted texts, oldest first
(fail closed in between).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any

import assay.refs as refs
from assay.errors import AssayError, BadInput
from assay.evidence.keys import GateKey, PublicKey, split_signature
from assay.forge import Forge, RefLog
from assay.forge.records import LostRace, RecordCodec, Stage, WritePolicy, write
from assay.github.pins import PIN_IDENTITY, IssuePin, read_pins
from assay.ids import check_id
from assay.plumbing import GitError

BINDING_KIND = "github-id-binding"
NUMBERED = "issue-"  # an id ``issue-<M>`` names issue #M alone


@dataclass(frozen=True)
class IdBinding:
    """Brief id ``brief`` is issue ``issue``'s, since ``at``."""

    brief: str
    issue: int
    at: str
    sig: str = ""

    def payload(self) -> bytes:
        fields = {k: v for k, v in asdict(self).items() if k != "sig"}
        return json.dumps({"kind": BINDING_KIND, **fields}, sort_keys=True).encode()

    def signed(self, key: GateKey) -> IdBinding:
        return replace(self, sig=key.sign(self.payload()))

    def verified_by(self, key: PublicKey) -> bool:
        try:
            _, signature = split_signature(self.sig, source=refs.github_id_ref(self.brief))
        except AssayError:
            return False
        return key.verifies(signature, self.payload())


def _validate(record: dict[str, Any]) -> None:
    check_id(str(record.get("brief")), where="field 'brief'")
    if not isinstance(record.get("issue"), int) or record["issue"] < 1:
        raise BadInput("field 'issue' must be an issue number")
    for name in ("at", "sig"):
        if not isinstance(record.get(name), str) or len(record[name]) > 512:
            raise BadInput(f"field {name!r} must be a short string")


def binding_codec(brief: str) -> RecordCodec:
    """The id binding's codec: ``record.json`` on ``refs.github_id_ref(brief)``."""
    return RecordCodec(refs.github_id_ref(brief), BINDING_KIND, validate=_validate)


def _log(forge: Forge, brief: str) -> RefLog:
    return RefLog.of(forge, binding_codec(brief))


def read_bindings(
    forge: Forge, key: PublicKey | None, *, tips: Mapping[str, str] | None = None
) -> dict[str, IdBinding]:
    """Every id's binding that ``key`` signed (``tips``: the refs a fetch the caller made
    found); a record it did not sign, or one that does not decode, binds nothing."""
    found: dict[str, IdBinding] = {}
    if key is None:
        return found
    listed = forge.refresh(refs.GITHUB_IDS) if tips is None else tips
    for ref, tip in sorted(listed.items()):
        if not ref.startswith(refs.GITHUB_IDS):
            continue
        brief = ref[len(refs.GITHUB_IDS) :]
        try:
            record = _log(forge, brief).assume(tip).latest(fetch=False)
        except AssayError:
            continue
        if record is None:
            continue
        binding = IdBinding(
            brief=record["brief"], issue=record["issue"], at=record["at"], sig=record["sig"]
        )
        if binding.brief == brief and binding.verified_by(key):
            found[brief] = binding
    return found


@dataclass(frozen=True)
class IssueRecords:
    """What the events job signed about issues: accepted texts by issue number, and id
    bindings by brief id."""

    pins: dict[int, IssuePin]
    bindings: dict[str, IdBinding]


def read_issue_records(forge: Forge, key: PublicKey | None) -> IssueRecords:
    """``read_pins`` and ``read_bindings`` from one listing of the forge's refs."""
    if key is None:
        return IssueRecords({}, {})
    tips = forge.refresh([refs.GITHUB_ISSUES, refs.GITHUB_IDS])
    return IssueRecords(read_pins(forge, key, tips=tips), read_bindings(forge, key, tips=tips))


def id_refusal(brief: str, number: int, bindings: Mapping[str, IdBinding]) -> str | None:
    """Why issue ``number`` may not be brief ``brief`` (None: the id is bound to it)."""
    if brief.startswith(NUMBERED) and brief != f"{NUMBERED}{number}":
        owner = brief[len(NUMBERED) :]
        return (
            f"brief id {brief!r} names issue #{owner}: an id of the form issue-N belongs to "
            "issue #N alone"
        )
    binding = bindings.get(brief)
    if binding is None:
        return (
            f"brief id {brief!r} is not bound to an issue yet: the events job "
            "(`assay github events`) binds each accepted text's id"
        )
    if binding.issue != number:
        return (
            f"brief id {brief!r} belongs to issue #{binding.issue}, which named it first "
            "(an id is never reused: its claim, events and evidence stay that issue's); give "
            "this issue another id"
        )
    return None


def bind_ids(
    forge: Forge,
    signer: Callable[[], GateKey],
    *,
    declared: Iterable[tuple[int, str]],
    bindings: Mapping[str, IdBinding],
    now: Callable[[], str] | None = None,
) -> dict[str, IdBinding]:
    """Bind each id in ``declared`` (issue number, id its accepted text declares) that
    ``bindings`` lacks to the lowest-numbered issue declaring it, in one push; returns the
    bindings written. An ``issue-<M>`` id is bound to issue #M only. A ref that holds no
    valid binding (deleted, forged) is written over; one another events job bound in the
    meantime keeps its binding (its push won the race)."""
    chosen: dict[str, int] = {}
    for number, brief in sorted(declared):
        if brief in bindings or brief in chosen:
            continue
        if brief.startswith(NUMBERED) and brief != f"{NUMBERED}{number}":
            continue
        chosen[brief] = number
    if not chosen:
        return {}
    key = signer()
    stamp = (now or _now)()
    tips = forge.refresh([refs.github_id_ref(brief) for brief in chosen])
    stage = Stage(forge, atomic=False)  # each binding lands, or loses its race, on its own
    written: dict[str, IdBinding] = {}
    for brief, number in sorted(chosen.items()):
        binding = IdBinding(brief=brief, issue=number, at=stamp).signed(key)
        stage.record(
            binding_codec(brief),
            {**asdict(binding)},
            on=tips.get(refs.github_id_ref(brief)),
            author=PIN_IDENTITY,
            message=f"github: brief id {brief} bound to issue #{number}",
        )
        written[brief] = binding
    policy = WritePolicy(attempts=1, what="binding", on_lost=lambda _r: LostRace.GIVE_BACK)
    pushed = write(forge, lambda _again: stage, policy=policy).result
    assert pushed is not None  # the stage moves every chosen binding
    landed: dict[str, IdBinding] = {}
    for brief, binding in written.items():
        outcome = pushed.refs.get(refs.github_id_ref(brief))
        if outcome is not None and outcome.ok:
            landed[brief] = binding
        elif outcome is None or not outcome.lost:
            raise GitError(f"{refs.github_id_ref(brief)}: the binding was refused: {pushed.detail}")
    return landed


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def id_note(number: int, reason: str) -> str:
    """The comment telling issue ``number`` its brief id is refused (once per accepted text)."""
    marker = f"<!-- assay:issue-id issue={number} -->"  # one note per issue, edited
    return (
        f"{marker}\n**Assay** · This issue is not a brief: {reason}. Set another `id:` in "
        "its front matter; a writer then accepts the new text (`/assay accept`).\n"
    )
