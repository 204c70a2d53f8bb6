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

from assay.errors import BadInput
from assay.forge import Forge, RefLog
from assay.ids import check_id
from assay.runtime import Event

FORMAT_VERSION = 1
EVENT_KINDS = frozenset({"approve", "reject", "signal", "cancel", "timer"})
MAX_TEXT = 20_000


def events_ref(brief: str) -> str:
    """The ref holding a brief's events."""
    return f"refs/assay/events/{check_id(brief)}"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def validate_record(record: Any, *, where: str) -> Event:
    """Check one stored record and return it as an ``Event``; ``BadInput`` names the field."""
    if not isinstance(record, Mapping):
        raise BadInput(f"{where}: an event record must be a JSON object")
    if record.get("v") != FORMAT_VERSION:
        raise BadInput(f"{where}: field 'v' must be {FORMAT_VERSION}, got {record.get('v')!r}")
    for name in ("id", "kind", "text", "actor", "at"):
        if not isinstance(record.get(name), str):
            raise BadInput(f"{where}: field {name!r} must be a string")
    if not record["id"]:
        raise BadInput(f"{where}: field 'id' must not be empty")
    if record["kind"] not in EVENT_KINDS:
        raise BadInput(
            f"{where}: field 'kind' is {record['kind']!r}, expected one of "
            + ", ".join(sorted(EVENT_KINDS))
        )
    if len(record["text"]) > MAX_TEXT:
        raise BadInput(f"{where}: field 'text' is over {MAX_TEXT} characters")
    data = record.get("data", {})
    if not isinstance(data, Mapping):
        raise BadInput(f"{where}: field 'data' must be an object")
    return Event(
        id=record["id"],
        kind=record["kind"],
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
        self._log = RefLog(forge, self.ref)

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
            "kind": kind,
            "text": text,
            "actor": actor,
            "at": _now(),
            "data": dict(data or {}),
        }
        event = validate_record(record, where=f"{self.ref} (new event)")
        self._log.append(record)
        return event

    def read(self) -> list[Event]:
        """Every event appended so far, oldest first, each validated."""
        records = self._log.read()
        return [
            validate_record(record, where=f"{self.ref} record {index}")
            for index, record in enumerate(records)
        ]


def pending(events: list[Event], consumed: set[str], *, kinds: frozenset[str]) -> list[Event]:
    """The events of ``kinds`` whose ids no journal entry has consumed yet."""
    return [event for event in events if event.kind in kinds and event.id not in consumed]
