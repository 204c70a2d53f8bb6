"""Events on the forge: approvals, rejections, steering and cancellations of one brief.

Each brief has one append-only log, ``refs/assay/events/<brief>``, kept by the forge's
``RefLog`` (one commit per record). This module owns the event record's format, its
validation on every read (a malformed record is ``BadInput`` naming the ref, the record and
the field), and the conversion to the runtime's ``Event``. ``assay approve|signal|cancel``
append here; the desk loop's ``RunHooks.events()`` and ``assay wake`` read from here.

Signed events: on a forge whose custom refs any writer may move (GitHub: a desk job can
push an ``approve`` naming a maintainer onto any events ref), an event counts only when it
carries ``sig``, an Ed25519 signature by the gate key the forge vouches for
(``assay.evidence.trust``), which only the job that checked the comment's author holds
(``assay github events``). Anything else is skipped with a note, never delivered: no
approval, steer or cancel from a record a desk could have written.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

import assay.refs as refs
from assay.errors import BadInput, Corrupt
from assay.forge import Forge, RefLog
from assay.forge.records import RecordCodec
from assay.ids import check_id
from assay.plumbing import Identity
from assay.runtime import Event

if TYPE_CHECKING:
    from assay.evidence.keys import GateKey, PublicKey

FORMAT_VERSION = 1
LOG_KIND = "events"
EVENTS_IDENTITY = Identity(name="assay events", email="events@assay.invalid")
EVENT_KINDS = frozenset({"approve", "reject", "signal", "cancel", "timer"})
MAX_TEXT = 20_000
MAX_DATA_BYTES = 16_000  # an event's ``data`` as JSON
MAX_NAME = 200  # id and actor
MAX_RECORD_BYTES = 64 * 1024  # the whole record: a bigger one is never read, only skipped
_UNREAD = object()  # the trusted key, before the first read needs it


def events_ref(brief: str) -> str:
    """The ref holding a brief's events."""
    return refs.events_ref(brief)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def validate_record(record: Any, *, where: str) -> Event:
    """Check one stored record and return it as an ``Event``; ``BadInput`` names the field.

    The log's own ``kind`` field is ``"events"`` (every ``RefLog`` record names its log);
    the event's kind is the field ``event``.
    """
    if not isinstance(record, Mapping):
        raise BadInput(f"{where}: an event record must be a JSON object")
    if record.get("v") != FORMAT_VERSION:
        raise BadInput(f"{where}: field 'v' must be {FORMAT_VERSION}, got {record.get('v')!r}")
    if not isinstance(record.get("sig", ""), str):
        raise BadInput(f"{where}: field 'sig' must be a string")
    for name in ("id", "event", "text", "actor", "at"):
        if not isinstance(record.get(name), str):
            raise BadInput(f"{where}: field {name!r} must be a string")
    if not record["id"]:
        raise BadInput(f"{where}: field 'id' must not be empty")
    for name in ("id", "actor"):
        if len(record[name]) > MAX_NAME:
            raise BadInput(f"{where}: field {name!r} is over {MAX_NAME} characters")
    if len(record["at"]) > 64:
        raise BadInput(f"{where}: field 'at' is not a timestamp")
    if record["event"] not in EVENT_KINDS:
        raise BadInput(
            f"{where}: field 'event' is {record['event']!r}, expected one of "
            + ", ".join(sorted(EVENT_KINDS))
        )
    if len(record["text"]) > MAX_TEXT:
        raise BadInput(f"{where}: field 'text' is over {MAX_TEXT} characters")
    data = record.get("data", {})
    if not isinstance(data, Mapping):
        raise BadInput(f"{where}: field 'data' must be an object")
    try:
        size = len(json.dumps(data, ensure_ascii=False, default=str))
    except (TypeError, ValueError, RecursionError):
        raise BadInput(f"{where}: field 'data' is not plain JSON") from None
    if size > MAX_DATA_BYTES:
        raise BadInput(f"{where}: field 'data' is over {MAX_DATA_BYTES} bytes")
    return Event(
        id=record["id"],
        kind=record["event"],
        text=record["text"],
        actor=record["actor"],
        at=record["at"],
        data=dict(data),
    )


class EventLog:
    """The events of one brief on the forge."""

    def __init__(self, forge: Forge, brief: str) -> None:
        self.forge = forge
        self.brief = check_id(brief)
        self.ref = events_ref(brief)
        self._log = RefLog.of(forge, events_codec(brief))
        self.skipped: list[str] = []  # notes on the records the last read() skipped
        self._trusted: PublicKey | object | None = _UNREAD  # the key events are checked with

    def append(
        self,
        kind: str,
        *,
        text: str = "",
        actor: str = "",
        data: Mapping[str, Any] | None = None,
        event_id: str | None = None,
        signer: GateKey | None = None,
    ) -> Event:
        """Append one event (validated before it is written) and return it; ``signer`` (the
        gate's key, held by the job that checked who sent it) signs the record."""
        record = {
            "v": FORMAT_VERSION,
            "id": event_id or uuid.uuid4().hex,
            "event": kind,
            "text": text,
            "actor": actor,
            "at": _now(),
            "data": dict(data or {}),
        }
        event = validate_record(record, where=f"{self.ref} (new event)")
        if signer is not None:
            record["kind"] = LOG_KIND  # as the log stamps it: the signature covers it too
            record["sig"] = signer.sign(_signed_bytes(record, brief=self.brief))
        self._log.append(
            record,
            author=EVENTS_IDENTITY,
            message=f"{kind} {self.brief}",
        )
        return event

    def read(self, *, fetched: bool = False, tip: str | None = None) -> list[Event]:
        """Every valid event appended so far, oldest first.

        A record that fails validation (malformed, oversized) is skipped, never delivered:
        ``skipped`` then holds one note per record naming the ref, the commit and the
        field, so one bad record cannot make every run of the brief fail. A log whose
        history itself is broken (not one record per commit) is ``BadInput`` (65).
        ``fetched``: the caller's own fetch just found the ref at ``tip`` (None: absent),
        so no fetch is made.
        """
        if not fetched:  # a drain point usually finds nothing new: no git process then
            tip = self.forge.refresh([self.ref]).get(self.ref)
        self._log.assume(tip)
        try:
            raw = self._log.raw_entries(fetch=False)
        except Corrupt as exc:
            raise BadInput(exc.message, ref=self.ref) from exc
        events: list[Event] = []
        self.skipped = []
        signed = None if self.forge.protects_custom_refs else self._trusted_key()
        for commit, blob in raw:
            try:
                event = decode_event(self._log.codec, commit, blob, signed_by=signed)
            except (BadInput, Corrupt) as bad:
                self.skipped.append(f"skipped: {bad.message}")
                continue
            events.append(event)
        return events

    def _trusted_key(self) -> PublicKey | Untrusted:
        """The key this forge's events must be signed with, read once."""
        # Imported here: the evidence package reads this module (the merge's approvals).
        from assay.evidence.trust import reader_key

        if self._trusted is _UNREAD:
            self._trusted = reader_key(self.forge) or NO_KEY
        return cast("PublicKey | Untrusted", self._trusted)


class Untrusted:
    """A forge whose events must be signed, with no key known to check them: none counts."""


NO_KEY = Untrusted()


def events_codec(brief: str) -> RecordCodec:
    """The event record's codec, for any reader (the desk's, the board's) and the writer:
    bounded, and every field checked by ``validate_record``."""
    return RecordCodec(
        events_ref(brief),
        LOG_KIND,
        version=FORMAT_VERSION,
        validate=_check_event,
        max_bytes=MAX_RECORD_BYTES,
    )


def _check_event(record: dict[str, Any]) -> None:
    validate_record(record, where="event record")


def decode_event(
    codec: RecordCodec,
    commit: str,
    blob: bytes | None,
    *,
    signed_by: PublicKey | Untrusted | None,
) -> Event:
    """The one decoder of a stored event: bounded before it is parsed, validated, and where
    any job may write the events ref (``signed_by`` not None: a forge that does not protect
    custom refs), counted only when the events job signed it with that key. ``BadInput`` or
    ``Corrupt`` naming the ref and commit: a reader skips the record, never delivers it."""
    where = f"{codec.ref} at {commit[:12]}"
    if blob is not None and len(blob) > MAX_RECORD_BYTES:
        raise BadInput(f"{where}: the record is over {MAX_RECORD_BYTES} bytes")
    try:
        record = codec.parse(commit, blob)
    except RecursionError:
        raise BadInput(f"{where}: the record is nested too deeply") from None
    event = validate_record(record, where=where)
    if signed_by is not None:
        brief = refs.brief_of(codec.ref, refs.EVENTS)
        _check_signature(record, brief=brief, key=signed_by, where=where)
    return event


def _check_signature(
    record: Mapping[str, Any], *, brief: str, key: PublicKey | Untrusted, where: str
) -> None:
    """``BadInput`` unless ``record`` carries ``key``'s signature over it and its brief."""
    from assay.evidence.keys import split_signature

    sig = record.get("sig", "")
    if not sig:
        raise BadInput(
            f"{where}: unsigned, and any job may write this ref: only events the "
            "events job signed count"
        )
    if isinstance(key, Untrusted):
        raise BadInput(
            f"{where}: no gate public key is known to check its signature "
            "(set ASSAY_GATE_PUBLIC_KEY)"
        )
    try:
        signer, signature = split_signature(sig, source=where)
    except Corrupt as bad:
        raise BadInput(bad.message) from None
    signed = _signed_bytes(record, brief=brief)
    if signer != key.fingerprint or not key.verifies(signature, signed):
        raise BadInput(f"{where}: not signed by the gate key {key.fingerprint}")


def _signed_bytes(record: Mapping[str, Any], *, brief: str) -> bytes:
    """What an event's signature covers: the record as stored, without ``sig``, and the
    brief whose log holds it (a signed approval copied onto another brief's log fails)."""
    body = {name: value for name, value in record.items() if name != "sig"}
    body["brief"] = brief
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def pending(events: list[Event], consumed: set[str], *, kinds: frozenset[str]) -> list[Event]:
    """The events of ``kinds`` whose ids no journal entry has consumed yet."""
    return [event for event in events if event.kind in kinds and event.id not in consumed]


def deliver(forge_spec: str, brief: str, event: Event) -> Event:
    """Append ``event`` (as built by ``assay approve|signal``) to ``brief``'s events ref."""
    from assay.forge import open_forge

    with open_forge(forge_spec) as forge:
        return EventLog(forge, brief).append(
            event.kind,
            text=event.text,
            actor=event.actor,
            data=event.data,
            event_id=event.id,
        )
