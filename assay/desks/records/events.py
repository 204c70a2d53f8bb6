"""Events on the forge: approvals, rejections, steering and cancellations of one brief.

Each brief has one append-only log, ``refs/assay/events/<brief>``, kept by the forge's
``RefLog`` (one commit per record). This module owns the event record's format, its
validation on every read (a malformed record is ``BadInput`` naming the ref, the record and
the field), and the conversion to the runtime's ``Event``. ``assay approve|signal|cancel``
append here; the desk loop's ``RunHooks.events()`` and ``assay wake`` read from here.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import assay.refs as refs
from assay.errors import BadInput, Corrupt
from assay.forge import Forge, RefLog
from assay.ids import check_id
from assay.plumbing import Identity
from assay.runtime import Event

FORMAT_VERSION = 1
LOG_KIND = "events"
EVENTS_IDENTITY = Identity(name="assay events", email="events@assay.invalid")
EVENT_KINDS = frozenset({"approve", "reject", "signal", "cancel", "timer"})
MAX_TEXT = 20_000
MAX_DATA_BYTES = 16_000  # an event's ``data`` as JSON
MAX_NAME = 200  # id and actor
MAX_RECORD_BYTES = 64 * 1024  # the whole record: a bigger one is never read, only skipped


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
        self._log = RefLog(forge, self.ref, kind=LOG_KIND, version=FORMAT_VERSION)
        self.skipped: list[str] = []  # notes on the records the last read() skipped

    def append(
        self,
        kind: str,
        *,
        text: str = "",
        actor: str = "",
        data: Mapping[str, Any] | None = None,
        event_id: str | None = None,
    ) -> Event:
        """Append one event (validated before it is written) and return it."""
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
        for commit, blob in raw:
            where = f"{self.ref} at {commit[:12]}"
            try:
                events.append(parse_event(self._log, commit, blob, where=where))
            except (BadInput, Corrupt) as bad:
                self.skipped.append(f"skipped: {bad.message}")
        return events


def parse_event(log: RefLog, commit: str, blob: bytes | None, *, where: str) -> Event:
    """One stored event record, bounded before it is parsed; ``BadInput``/``Corrupt``."""
    if blob is not None and len(blob) > MAX_RECORD_BYTES:
        raise BadInput(f"{where}: the record is over {MAX_RECORD_BYTES} bytes")
    try:
        record = log.parse(commit, blob)
    except RecursionError:
        raise BadInput(f"{where}: the record is nested too deeply") from None
    return validate_record(record, where=where)


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
