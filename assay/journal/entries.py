"""Every kind of journal entry, as a typed record that encodes and decodes itself.

The runtime writes only these (``JournalWriter.append(entry)``), and every reader decodes
lines with ``decode`` before it judges them (``assay.journal.fold``), so an entry kind is
defined once: its fields, which are optional, and how it is spelled on disk. The on-disk
format is docs/journal-entry.schema.json; the writer adds the envelope (``v``, ``seq``,
``prev``, ``run``, ``fence``, ``sum``), which a decoded entry carries as ``seq``, ``fence``
and ``sum``.

To add a kind: a frozen dataclass subclassing ``Entry`` with ``KIND`` set (and ``STATUS``
when it shares ``kind`` with another record, as the step intent and result do), its fields
in the schema's spelling (``key=`` metadata for Python keywords such as ``in``), listed in
``KINDS`` below, in ``assay.journal.format.KINDS`` and in the schema; then teach ``fold``
what it means.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from types import UnionType
from typing import Any, ClassVar, Self, Union, get_args, get_origin, get_type_hints

from assay.errors import Corrupt

Packed = Mapping[str, Any]  # {"value": v} inline, or {"blob": "sha256:…"}
ENVELOPE = {"envelope": True}
NULLABLE = {"null": True}  # written as null rather than left out


def _key(name: str, *, nullable: bool = False) -> dict[str, Any]:
    return {"key": name, "null": nullable}


@dataclass(frozen=True, kw_only=True)
class Entry:
    """Fields every line carries; subclasses add their own."""

    KIND: ClassVar[str] = ""
    STATUS: ClassVar[frozenset[str]] = frozenset()  # the statuses this record decodes

    blobs: tuple[str, ...] = ()  # blobs this line introduces
    seq: int = field(default=0, metadata=ENVELOPE)  # filled by the writer
    fence: int = field(default=0, metadata=ENVELOPE)
    sum: str = field(default="", metadata=ENVELOPE)

    @property
    def kind(self) -> str:
        return self.KIND

    @property
    def time(self) -> str:
        """When it happened, as written: ``t1``, else ``t``, else ``t0``."""
        for name in ("t1", "t", "t0"):
            value = getattr(self, name, None)
            if isinstance(value, str) and value:
                return value
        return ""

    def to_json(self) -> dict[str, Any]:
        """The entry as the writer takes it (no envelope fields)."""
        data: dict[str, Any] = {"kind": self.KIND}
        for item in fields(self):
            if item.metadata.get("envelope"):
                continue
            value = getattr(self, item.name)
            if item.name == "blobs" and not value:
                continue
            if value is None and not item.metadata.get("null"):
                continue
            if type(value) is tuple:
                value = list(value)
            data[item.metadata.get("key", item.name)] = value
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        """The record of one line, each field checked against its type (``Corrupt`` naming
        the field otherwise); fields it does not know are ignored, as readers must."""
        return _decoder(cls).read(data)  # type: ignore[return-value]


@dataclass(frozen=True, kw_only=True)
class Start(Entry):
    KIND = "start"
    input: Packed | None = field(default=None, metadata=_key("in"))
    sandbox: Mapping[str, Any] | None = None  # how the run's agent code was confined
    # What a desk pushes to its forge: {"mode": "step" | "window" | "exit", "window_s": 30.0}
    durability: Mapping[str, Any] | None = None
    t: str = ""


@dataclass(frozen=True, kw_only=True)
class StepIntent(Entry):
    """Written before a model, tool or effect step runs (``status: started``)."""

    KIND = "step"
    STATUS = frozenset({"started"})
    pos: int = 0
    step: str  # model | tool | effect | compute
    name: str = ""
    key: str = ""
    t0: str = ""
    status: str = "started"
    args: Mapping[str, Any] | None = None  # tool steps
    context: str | None = field(default=None, metadata=_key("in"))  # model: context node
    # A gateway model call (``name: wire``, docs/journal.md): which API and route, whether
    # streamed, the normalised request's digest, the rest of the request, steering added.
    api: str | None = None
    route: str | None = None
    stream: bool | None = None
    digest: str | None = None
    req: str | None = None
    turn: bool | None = None  # a conversation turn (steering may be delivered with it)
    steer: Any = None


@dataclass(frozen=True, kw_only=True)
class StepResult(Entry):
    """A step's outcome: ``ok`` with ``out``, or ``error`` with ``error``."""

    KIND = "step"
    STATUS = frozenset({"ok", "error"})
    pos: int = 0
    step: str = ""
    name: str = ""
    status: str = ""
    key: str = ""
    t0: str = ""
    t1: str | None = None
    ms: float | None = None
    out: Packed | None = None
    error: Mapping[str, Any] | None = None
    usage: Mapping[str, Any] | None = None
    model: str | None = None
    # A gateway model call (``name: wire``, docs/journal.md): the answer's HTTP status and
    # content type, and the agent CLI's own tool calls its request completed.
    http: int | None = None
    ctype: str | None = None
    stream: bool | None = None
    digest: str | None = None
    tools: tuple[Mapping[str, Any], ...] | None = None


@dataclass(frozen=True, kw_only=True)
class Checkpoint(Entry):
    KIND = "checkpoint"
    pos: int = 0
    out: Packed | None = None
    t: str = ""


@dataclass(frozen=True, kw_only=True)
class Signal(Entry):
    """A drain of steering events (``run.signals()``)."""

    KIND = "signal"
    pos: int = 0
    events: list[Mapping[str, Any]] = field(default_factory=list)
    t: str = ""


@dataclass(frozen=True, kw_only=True)
class Wait(Entry):
    KIND = "wait"
    pos: int = 0
    waiting_for: str = field(default="", metadata=_key("for"))
    until: str | None = field(default=None, metadata=NULLABLE)
    sleep: bool | None = None
    t: str = ""


@dataclass(frozen=True, kw_only=True)
class Wake(Entry):
    KIND = "wake"
    pos: int = 0
    waiting_for: str = field(default="", metadata=_key("for"))
    event: Mapping[str, Any] | None = field(default=None, metadata=NULLABLE)
    timer: str | None = None
    sleep: bool | None = None
    t: str = ""


@dataclass(frozen=True, kw_only=True)
class Denied(Entry):
    KIND = "denied"
    pos: int = 0
    step: str = ""
    name: str = ""
    args: Mapping[str, Any] | None = None
    reason: str | None = None
    file: str | None = None  # a refused checkpoint: the file holding a secret (never the value)
    t: str = ""


@dataclass(frozen=True, kw_only=True)
class Budget(Entry):
    KIND = "budget"
    at: int = 0
    limit: str = ""
    used: float = 0.0
    maximum: float = field(default=0.0, metadata=_key("max"))
    t: str = ""


@dataclass(frozen=True, kw_only=True)
class Takeover(Entry):
    """A new holder's first line; the envelope's ``fence`` is the new fence."""

    KIND = "takeover"
    prev_fence: int = 0
    # Model calls the previous holder had recorded past this journal's end (its claim's
    # last renewal said so) and lost with its machine: this holder pays for them again.
    repaid: int | None = None
    t: str = ""

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "fence": self.fence}


@dataclass(frozen=True, kw_only=True)
class Diverged(Entry):
    KIND = "diverged"
    pos: int = 0
    recorded: str = ""
    requested: str = ""
    field: str | None = None  # a gateway model call: the first request field that differs
    t: str = ""


@dataclass(frozen=True, kw_only=True)
class Compensate(Entry):
    KIND = "compensate"
    pos: int = 0
    name: str = ""
    status: str = ""  # started | ok | error
    error: Mapping[str, Any] | None = None
    t0: str | None = None
    t1: str | None = None


@dataclass(frozen=True, kw_only=True)
class Error(Entry):
    KIND = "error"
    error: Mapping[str, Any] = field(default_factory=dict)
    t: str = ""


@dataclass(frozen=True, kw_only=True)
class End(Entry):
    KIND = "end"
    status: str = ""  # ok | failed
    out: Packed | None = None
    message: str | None = None
    t: str = ""


@dataclass(frozen=True, kw_only=True)
class Continue(Entry):
    """The last line of a full segment; the chain runs on in ``segment``."""

    KIND = "continue"
    segment: str = ""
    snapshot: Packed | None = field(default=None, metadata=NULLABLE)


KINDS: tuple[type[Entry], ...] = (
    Start,
    StepIntent,
    StepResult,
    Checkpoint,
    Signal,
    Wait,
    Wake,
    Denied,
    Budget,
    Takeover,
    Diverged,
    Compensate,
    Error,
    End,
    Continue,
)
_BY_KIND: dict[str, list[type[Entry]]] = {}
for _record in KINDS:
    _BY_KIND.setdefault(_record.KIND, []).append(_record)


def decode(line: Mapping[str, Any]) -> Entry:
    """The typed record of one verified line; ``Corrupt`` for a kind it does not know or a
    field whose value is not of the field's type (a hash-chained line proves only that it
    was not changed after it was written, not that its writer was this Assay).

    A field a line lacks takes its default: the writer writes every field the schema
    requires, and readers of old or hand-made lines have always tolerated gaps. Only a
    field without a default (a step intent's ``step``) must be there."""
    kind = line.get("kind")
    records = _BY_KIND.get(kind) if isinstance(kind, str) else None
    if not records:
        raise Corrupt(f"journal line {line.get('seq', '?')}: unknown entry kind {kind!r}")
    record = records[-1]
    if len(records) > 1:
        status = line.get("status")
        for candidate in records:
            if type(status) is str and status in candidate.STATUS:
                record = candidate
                break
    return record.from_json(line)


# A value's JSON type, as the schema names it. A line read from disk holds only these; a
# line the writer has just appended may also hold a tuple or another kind of mapping.
_JSON_TYPES: dict[type, str] = {
    dict: "object",
    list: "array",
    tuple: "array",
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
}
_SPOKEN = {"object": "an object", "array": "an array", "integer": "an integer", "null": "null"}


def _json_type(value: Any) -> str:
    found = _JSON_TYPES.get(type(value))
    if found is None:
        found = "object" if isinstance(value, Mapping) else type(value).__name__
    return found


def _accepts(hint: Any) -> frozenset[str] | None:
    """The JSON types a field annotated ``hint`` takes (None: any value)."""
    if hint is Any:
        return None
    if get_origin(hint) in (Union, UnionType):
        parts = [_accepts(arg) for arg in get_args(hint)]
        return None if None in parts else frozenset().union(*parts)  # type: ignore[arg-type]
    base = get_origin(hint) or hint
    for python, names in _ACCEPTS:
        if base is python or (python is Mapping and issubclass(base, Mapping)):
            return names
    raise TypeError(f"journal entries: no JSON type for a field annotated {hint!r}")


_ACCEPTS: tuple[tuple[Any, frozenset[str]], ...] = (
    (type(None), frozenset({"null"})),
    (bool, frozenset({"boolean"})),
    (int, frozenset({"integer"})),
    (float, frozenset({"integer", "number"})),
    (str, frozenset({"string"})),
    (list, frozenset({"array"})),
    (tuple, frozenset({"array"})),
    (Mapping, frozenset({"object"})),
)


def _array(hint: Any) -> Any:
    """The ``list[X]`` or ``tuple[X, ...]`` a field annotated ``hint`` takes, if any."""
    if get_origin(hint) in (Union, UnionType):
        return next((arg for arg in get_args(hint) if _array(arg) is not None), None)
    return hint if get_origin(hint) in (list, tuple) else None


@dataclass(frozen=True)
class _Field:
    """How one line key is read into one field of a record."""

    attr: str
    key: str
    accepts: frozenset[str] | None  # None: any JSON value
    items: frozenset[str] | None  # an array's items (None: any)
    as_tuple: bool  # an array held as a tuple (the record is frozen)


class _Decoder:
    """Reads lines into one record type; made once per type (a resume decodes every line)."""

    def __init__(self, record: type[Entry]) -> None:
        self.record = record
        hints = get_type_hints(record)
        self.fields: dict[str, _Field] = {}
        required = []
        for item in fields(record):
            hint = hints[item.name]
            array = _array(hint)
            key = item.metadata.get("key", item.name)
            self.fields[key] = _Field(
                attr=item.name,
                key=key,
                accepts=_accepts(hint),
                items=_accepts(get_args(array)[0]) if array is not None else None,
                as_tuple=array is not None and get_origin(array) is tuple,
            )
            if item.default is MISSING and item.default_factory is MISSING:
                required.append(key)
        self.required = tuple(required)
        self.defaults = {
            item.name: item.default for item in fields(record) if item.default is not MISSING
        }
        self.factories = tuple(
            (item.name, item.default_factory)
            for item in fields(record)
            if item.default_factory is not MISSING
        )

    def read(self, line: Mapping[str, Any]) -> Entry:
        values: dict[str, Any] = {}
        for key, value in line.items():
            spec = self.fields.get(key)
            if spec is None:
                continue
            if spec.accepts is not None and _JSON_TYPES.get(type(value)) not in spec.accepts:
                self._check(line, spec, value)
            if spec.items is not None and type(value) in (list, tuple):
                for item in value:
                    if _JSON_TYPES.get(type(item)) not in spec.items:
                        self._check(line, spec, item, what=f"an item of field {key}")
                if spec.as_tuple:
                    value = tuple(value)
            values[spec.attr] = value
        for key in self.required:
            if key not in line:
                raise _corrupt(line, f"field {key} is missing")
        # A frozen dataclass's __init__ sets each of its fields through object.__setattr__:
        # 26 calls for a step result, most of a decode's cost. The records define no
        # __post_init__, so filling the instance's __dict__ makes the same record.
        entry = object.__new__(self.record)
        state = entry.__dict__
        state.update(self.defaults)
        for attr, factory in self.factories:
            if attr not in values:
                state[attr] = factory()
        state.update(values)
        return entry

    @staticmethod
    def _check(line: Mapping[str, Any], spec: _Field, value: Any, *, what: str = "") -> None:
        found = _json_type(value)
        expected = spec.items if what else spec.accepts
        if expected is not None and found not in expected:
            names = sorted(expected, key=lambda name: (name == "null", name))
            wanted = " or ".join(_SPOKEN.get(name, f"a {name}") for name in names)
            found = _SPOKEN.get(found, f"a {found}")
            raise _corrupt(line, f"{what or f'field {spec.key}'} is {found}, expected {wanted}")


_DECODERS: dict[type[Entry], _Decoder] = {}


def _decoder(record: type[Entry]) -> _Decoder:
    found = _DECODERS.get(record)
    if found is None:
        found = _DECODERS[record] = _Decoder(record)
    return found


def _corrupt(line: Mapping[str, Any], problem: str) -> Corrupt:
    where = f"journal line {line.get('seq', '?')}"
    return Corrupt(f"{where} ({line.get('kind')}): {problem}", where=where)


def entry_json(entry: Entry | Mapping[str, Any]) -> dict[str, Any]:
    """What the writer writes for ``entry`` (a record, or an already encoded dict)."""
    return entry.to_json() if isinstance(entry, Entry) else dict(entry)
