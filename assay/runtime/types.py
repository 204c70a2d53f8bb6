"""The shapes the runtime exchanges with the rest of Assay: hooks, tools, events, budgets.

``RunHooks`` and ``ToolRunner`` are the seams the desk loop fills (claims, pushes, tools);
a local ``assay run --journal DIR`` uses none of them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from assay.errors import BadInput, Failed


class RunHooks(Protocol):
    """What the runtime asks of whoever hosts the run (the desk loop, on a forge)."""

    def durability_point(self, reason: str) -> None:
        """Make the journal durable beyond this machine (commit + CAS push); may raise Fenced."""
        ...

    def heartbeat(self, progress: dict[str, Any]) -> None:
        """Renew the lease from inside a long step."""
        ...

    def ensure_owner(self) -> None:
        """Raise ``Fenced`` unless this holder still holds the claim at its fence."""
        ...

    def events(self) -> list[Event]:
        """Every event delivered to this run so far (consumed or not)."""
        ...


class ToolRunner(Protocol):
    """The tools a desk declared; ``call`` may raise ``Denied``."""

    allowed: frozenset[str]

    def call(self, name: str, args: dict[str, Any]) -> Any: ...

    def specs(self) -> list[dict[str, Any]]: ...


EVENT_KINDS = frozenset({"approve", "reject", "signal", "cancel", "timer"})


@dataclass(frozen=True)
class Event:
    """An approval, rejection, steering signal, cancel or timer delivered to a run."""

    id: str
    kind: str
    text: str = ""
    actor: str = ""
    at: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: Any, *, where: str = "event") -> Event:
        """Parse an event record; ``BadInput`` naming ``where`` and the field."""
        if not isinstance(value, dict):
            raise BadInput(f"{where}: an event must be a JSON object")
        for name in ("id", "kind"):
            if not isinstance(value.get(name), str) or not value[name]:
                raise BadInput(f"{where}: field {name} must be a non-empty string")
        if value["kind"] not in EVENT_KINDS:
            raise BadInput(
                f"{where}: field kind {value['kind']!r} is not one of {sorted(EVENT_KINDS)}"
            )
        for name in ("text", "actor", "at"):
            if not isinstance(value.get(name, ""), str):
                raise BadInput(f"{where}: field {name} must be a string")
        data = value.get("data", {})
        if not isinstance(data, dict):
            raise BadInput(f"{where}: field data must be an object")
        return cls(
            id=value["id"],
            kind=value["kind"],
            text=value.get("text", ""),
            actor=value.get("actor", ""),
            at=value.get("at", ""),
            data=data,
        )

    def satisfies(self, waiting_for: str) -> bool:
        """Whether this event ends ``wait_for(waiting_for)``.

        ``"approval"`` is ended by an approve or reject event; an approve/reject naming
        something else (``data.name``) ends a wait for that name; otherwise kinds match.
        """
        if self.kind in {"approve", "reject"}:
            return str(self.data.get("name") or "approval") == waiting_for
        return self.kind == waiting_for or self.data.get("name") == waiting_for


@dataclass(frozen=True)
class Budget:
    """Limits on a run; ``None`` means unlimited. Exhausting one pauses the run (exit 7).

    ``wall_s`` counts the seconds steps spent running, as recorded in the journal, so time
    spent suspended (holding no process) does not use it up.
    """

    steps: int | None = None
    model_calls: int | None = None
    tokens: int | None = None
    usd: float | None = None
    wall_s: float | None = None


@dataclass(frozen=True)
class RunResult:
    """How an ``execute()`` ended: status word and exit code of DESIGN.md section 8."""

    status: str
    code: int
    output: Any = None
    steps: int = 0
    waiting_for: str | None = None
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class StepError(Failed):
    """A step's body raised; carries the original type name. Raised fresh and on replay alike."""

    def __init__(self, message: str, *, step: str, error_type: str) -> None:
        super().__init__(message, step=step, error_type=error_type)
        self.step = step
        self.error_type = error_type


class StepOutputError(BadInput):
    """A step's output (fresh or recorded) does not fit its declared shape."""


__all__ = [
    "EVENT_KINDS",
    "Budget",
    "Event",
    "RunHooks",
    "RunResult",
    "StepError",
    "StepOutputError",
    "ToolRunner",
]
