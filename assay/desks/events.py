"""Events on the forge: approvals, rejections, steering and cancellations of one brief.

Each brief has one append-only log, ``refs/assay/events/<brief>``, kept by the forge's
``RefLog`` (one commit per record). This module owns the event record's format, its
validation on every read (a malformed record is ``BadInput`` naming the ref, the record and
the field), and the conversion to the runtime's ``Event``. ``assay approve|signal|cancel``
append here; the desk loop's ``RunHooks.events()`` and ``assay wake`` read from here.
"""

from __future__ import annotations

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
        self._log = RefLog(
            forge, self.ref, kind=LOG_KIND, version=FORMAT_VERSION, validate=self._check
        )

    def _check(self, record: dict[str, Any]) -> None:
        validate_record(record, where=self.ref)

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

    def read(self) -> list[Event]:
        """Every event appended so far, oldest first, each validated.

        A record that fails validation is ``BadInput`` (exit 65) naming the ref, the
        commit and the field: an event is input, and nothing consumes a malformed one.
        """
        try:
            entries = self._log.entries()
        except Corrupt as exc:
            raise BadInput(exc.message, ref=self.ref) from exc
        return [
            validate_record(entry.record, where=f"{self.ref} at {entry.commit[:12]}")
            for entry in entries
        ]


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
