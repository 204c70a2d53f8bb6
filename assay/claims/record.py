"""The claim record: the ``claim.json`` a claim ref's commit holds (DESIGN §5).

Format version 1::

    {"v": 1, "brief": "b1", "desk": "coder", "holder": "<token>", "fence": 3,
     "state": "held", "since": "2026-01-01T00:00:00.000Z",
     "renewed_at": "2026-01-01T00:00:10.000Z", "lease_s": 300.0,
     "waiting_for": null, "attempt": 3, "journal_head": "sha256:..." | null, "note": ""}

and, only when a renewal reported it, ``"calls": 12``: the model calls the holder's local
journal had recorded at that renewal, pushed or not (a desk in ``window`` or ``exit``
durability holds calls the forge has not seen; the next holder, resuming from the forge
after the machine was lost, knows from it how many it pays for again).

And, only when the holder took the claim inside a GitHub Actions job,
``"workflow_run": 123456``: that job's workflow run (``GITHUB_RUN_ID``), from whose status
a sweep on GitHub judges the holder alive once its lease lapsed (``assay.sweep.engine``).

Every read validates every field; a record that fails is ``Corrupt`` naming the ref.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, cast

import assay.refs as refs
from assay.errors import BadInput, Corrupt
from assay.ids import check_id
from assay.states import CLAIM_STATES, lease_expired

FORMAT_VERSION = 1
CLAIM_FILE = "claim.json"
CLAIMS_PREFIX = refs.CLAIMS
DEFAULT_SKEW_S = 30.0
# Bounds on every number a claim carries, so no record can overflow a clock downstream
# (a lease of 1e23 s once made every reader of the forge fail).
MAX_LEASE_S = 30 * 86400.0
MAX_SKEW_S = 86400.0
MAX_COUNTER = 2**53  # fence, attempt: beyond this JSON numbers lose precision
MAX_CLAIM_BYTES = 64 * 1024
MAX_NOTE_CHARS = 4000
MAX_WAITING_FOR_CHARS = 300
_JOURNAL_HEAD = re.compile(r"sha256:[0-9a-f]{64}")

# A claim's state: one of ``assay.states.CLAIM_STATES``, the table every reader judges by.
State = str
STATES: tuple[State, ...] = tuple(CLAIM_STATES)

_FIELDS: dict[str, tuple[type, ...]] = {
    "v": (int,),
    "brief": (str,),
    "desk": (str,),
    "holder": (str,),
    "fence": (int,),
    "state": (str,),
    "since": (str,),
    "renewed_at": (str,),
    "lease_s": (int, float),
    "waiting_for": (str, type(None)),
    "attempt": (int,),
    "journal_head": (str, type(None)),
    "note": (str,),
}
_OPTIONAL: dict[str, tuple[type, ...]] = {"calls": (int,), "workflow_run": (int,)}


def workflow_run_from_env(environ: Mapping[str, str] | None = None) -> int:
    """The GitHub Actions workflow run this process runs in (``GITHUB_RUN_ID`` when
    ``GITHUB_ACTIONS`` is ``true``), else 0."""
    env = os.environ if environ is None else environ
    run = env.get("GITHUB_RUN_ID", "").strip()
    if env.get("GITHUB_ACTIONS") != "true" or not run.isdigit():
        return 0
    return int(run) if int(run) <= MAX_COUNTER else 0


def claim_ref(brief: str) -> str:
    """``refs/assay/claims/<brief>`` for a checked brief id."""
    return refs.claim_ref(brief)


def now_utc() -> datetime:
    return datetime.now(UTC)


def format_time(moment: datetime) -> str:
    """ISO 8601 UTC with milliseconds and a ``Z``: the one timestamp form in records."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"timestamp {text!r} has no time zone")
    return moment


def skew_from_env(value: float | None = None) -> float:
    """The clock-skew allowance: an explicit value, else ``ASSAY_CLAIM_SKEW``, else 30 s."""
    if value is not None:
        raw: object = value
    else:
        raw = os.environ.get("ASSAY_CLAIM_SKEW", DEFAULT_SKEW_S)
    try:
        skew = float(cast(Any, raw))
    except ValueError as exc:
        raise BadInput(f"ASSAY_CLAIM_SKEW / --skew: {raw!r} is not a number of seconds") from exc
    if not math.isfinite(skew) or skew < 0 or skew > MAX_SKEW_S:
        raise BadInput(
            f"--skew / ASSAY_CLAIM_SKEW must be 0 to {MAX_SKEW_S:g} seconds, not {raw!r}",
            field="skew",
        )
    return skew


def check_lease(lease_s: Any, *, what: str = "--lease") -> float:
    """A lease in seconds within (0, MAX_LEASE_S]; ``BadInput`` naming ``what`` otherwise."""
    try:
        lease = float(lease_s)
    except (TypeError, ValueError, OverflowError):
        lease = math.nan
    if isinstance(lease_s, bool) or not math.isfinite(lease) or not 0 < lease <= MAX_LEASE_S:
        raise BadInput(
            f"{what} must be more than 0 and at most {MAX_LEASE_S:g} seconds, not {lease_s!r}",
            field="lease_s",
        )
    return lease


@dataclass(frozen=True)
class ClaimRecord:
    """One claim as read from (or about to be written to) its ref."""

    brief: str
    desk: str
    holder: str
    fence: int
    state: State
    since: str
    renewed_at: str
    lease_s: float
    waiting_for: str | None = None
    attempt: int = 1
    journal_head: str | None = None
    note: str = ""
    calls: int = 0  # model calls in the holder's local journal at its last renewal
    workflow_run: int = 0  # the holder's GitHub Actions run (GITHUB_RUN_ID), 0: none
    v: int = FORMAT_VERSION
    sha: str = field(default="", compare=False)  # the commit holding it; not in the JSON

    @property
    def ref(self) -> str:
        return CLAIMS_PREFIX + self.brief

    @property
    def has_lease(self) -> bool:
        """Whether a lease clock runs in this state (``held``)."""
        rule = CLAIM_STATES.get(self.state)
        return rule is not None and rule.lease

    def expires_at(self, *, skew_s: float) -> datetime | None:
        """When a held claim stops being live; None for states without a lease clock."""
        if not self.has_lease:
            return None
        renewed = parse_time(self.renewed_at).timestamp()
        return datetime.fromtimestamp(renewed + self.lease_s + skew_s, UTC)

    def expired(self, *, skew_s: float, now: datetime | None = None) -> bool:
        """``now > renewed_at + lease_s + skew`` for a held claim (``assay.states``' rule)."""
        return self.has_lease and lease_expired(
            parse_time(self.renewed_at), self.lease_s, now=now or now_utc(), skew_s=skew_s
        )

    def lease_age(self, now: datetime | None = None) -> float:
        """Seconds since the last renewal (or acquisition)."""
        return ((now or now_utc()) - parse_time(self.renewed_at)).total_seconds()

    def status(self, *, skew_s: float, now: datetime | None = None) -> str:
        """The state as a reader should see it: ``held`` turns ``expired`` past its lease."""
        if self.expired(skew_s=skew_s, now=now):
            return "expired"
        return self.state

    def to_json(self) -> dict[str, Any]:
        return {
            **({"calls": self.calls} if self.calls else {}),
            **({"workflow_run": self.workflow_run} if self.workflow_run else {}),
            "v": self.v,
            "brief": self.brief,
            "desk": self.desk,
            "holder": self.holder,
            "fence": self.fence,
            "state": self.state,
            "since": self.since,
            "renewed_at": self.renewed_at,
            "lease_s": self.lease_s,
            "waiting_for": self.waiting_for,
            "attempt": self.attempt,
            "journal_head": self.journal_head,
            "note": self.note,
        }

    def to_bytes(self) -> bytes:
        return (json.dumps(self.to_json(), sort_keys=True, indent=1) + "\n").encode()

    def evolve(self, **changes: Any) -> ClaimRecord:
        return replace(self, **changes)


def validate(data: Any) -> ClaimRecord:
    """Turn parsed JSON into a record or raise ``ValueError`` saying which field is wrong."""
    if not isinstance(data, dict):
        raise ValueError("claim.json must be a JSON object")
    if data.get("v") != FORMAT_VERSION:
        raise ValueError(f"field 'v' is {data.get('v')!r}; this Assay reads v{FORMAT_VERSION}")
    unknown = sorted(set(data) - set(_FIELDS) - set(_OPTIONAL))
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)}")
    for name, types in _FIELDS.items():
        if name not in data:
            raise ValueError(f"field {name!r} is missing")
        value = data[name]
        if isinstance(value, bool) or not isinstance(value, types):
            raise ValueError(f"field {name!r} has the wrong type ({type(value).__name__})")
    for name, types in _OPTIONAL.items():
        value = data.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, types):
            raise ValueError(f"field {name!r} has the wrong type ({type(value).__name__})")
        if not 0 <= cast(int, value) <= MAX_COUNTER:
            raise ValueError(f"field {name!r} must be 0 to {MAX_COUNTER}")
    try:
        check_id(data["brief"], what="field 'brief'")
        check_id(data["desk"], what="field 'desk'")
    except BadInput as exc:
        raise ValueError(exc.message) from exc
    if data["state"] not in STATES:
        raise ValueError(f"field 'state' is {data['state']!r}, not one of {', '.join(STATES)}")
    if not data["holder"] or len(data["holder"]) > 200:
        raise ValueError("field 'holder' must be a non-empty token")
    for name in ("fence", "attempt"):
        if not 1 <= data[name] <= MAX_COUNTER:
            raise ValueError(f"field {name!r} must be 1 to {MAX_COUNTER}")
    lease = float(data["lease_s"])
    if not math.isfinite(lease) or not 0 < lease <= MAX_LEASE_S:
        raise ValueError(f"field 'lease_s' must be more than 0 and at most {MAX_LEASE_S:g} s")
    if len(data["note"]) > MAX_NOTE_CHARS:
        raise ValueError(f"field 'note' is over {MAX_NOTE_CHARS} characters")
    waiting = data["waiting_for"]
    if waiting is not None and len(waiting) > MAX_WAITING_FOR_CHARS:
        raise ValueError(f"field 'waiting_for' is over {MAX_WAITING_FOR_CHARS} characters")
    head = data["journal_head"]
    if head is not None and head != "" and not _JOURNAL_HEAD.fullmatch(head):
        raise ValueError("field 'journal_head' is not a sha256: journal line hash")
    for name in ("since", "renewed_at"):
        try:
            moment = parse_time(data[name])
            # renewed_at + lease + skew must still be a time every reader can represent
            datetime.fromtimestamp(moment.timestamp() + MAX_LEASE_S + MAX_SKEW_S, UTC)
        except (ValueError, OverflowError, OSError) as exc:
            raise ValueError(f"field {name!r}: {str(exc)[:200]}") from None
    return ClaimRecord(
        brief=data["brief"],
        desk=data["desk"],
        holder=data["holder"],
        fence=data["fence"],
        state=data["state"],
        since=data["since"],
        renewed_at=data["renewed_at"],
        lease_s=lease,
        waiting_for=data["waiting_for"],
        attempt=data["attempt"],
        journal_head=data["journal_head"],
        note=data["note"],
        calls=data.get("calls", 0),
        workflow_run=data.get("workflow_run", 0),
    )


@dataclass(frozen=True)
class ClaimCodec:
    """The claim log's codec (``assay.forge.records.Codec``): ``claim.json`` on
    ``refs/assay/claims/<brief>``, every field checked both ways."""

    brief: str
    path: str = CLAIM_FILE

    @property
    def ref(self) -> str:
        return claim_ref(self.brief)

    def encode(self, record: ClaimRecord) -> tuple[ClaimRecord, bytes]:
        """``record`` and its bytes; ``BadInput`` naming the ref and field when a reader
        would refuse it (nothing is written)."""
        if record.brief != self.brief:
            raise BadInput(f"{self.ref}: a record of brief {record.brief!r} does not go here")
        payload = record.to_bytes()
        try:
            validate(record.to_json())
        except ValueError as exc:
            raise BadInput(f"{self.ref}: claim record cannot be stored: {exc}") from None
        if len(payload) > MAX_CLAIM_BYTES:
            raise BadInput(f"{self.ref}: {CLAIM_FILE} would be over {MAX_CLAIM_BYTES} bytes")
        return record.evolve(sha=""), payload

    def parse(self, commit: str, blob: bytes | None) -> ClaimRecord:
        return parse_record(blob, ref=self.ref, sha=commit)


def parse_record(blob: bytes | None, *, ref: str, sha: str) -> ClaimRecord:
    """Parse and validate the ``claim.json`` of commit ``sha`` on ``ref``; Corrupt if bad."""
    where = f"{ref} at {sha[:12]}"
    if blob is None:
        raise Corrupt(f"claim {where}: the commit holds no {CLAIM_FILE}", ref=ref)
    if len(blob) > MAX_CLAIM_BYTES:
        raise Corrupt(f"claim {where}: {CLAIM_FILE} is over {MAX_CLAIM_BYTES} bytes", ref=ref)
    try:
        record = validate(json.loads(blob))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise Corrupt(f"claim {where}: {CLAIM_FILE} is not JSON ({exc})", ref=ref) from None
    except RecursionError:
        raise Corrupt(f"claim {where}: {CLAIM_FILE} is nested too deeply", ref=ref) from None
    except ValueError as exc:
        raise Corrupt(f"claim {where}: {exc}", ref=ref) from exc
    if ref != CLAIMS_PREFIX + record.brief:
        raise Corrupt(f"claim {where}: field 'brief' is {record.brief!r}", ref=ref)
    return replace(record, sha=sha)
