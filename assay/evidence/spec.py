"""What the gate needs from a brief: its acceptance rows and its environment declaration.

The gate reads only these two parts of a brief, through small adapters, so that the
brief model (``assay.briefs``) can grow without the gate depending on its every field.
Rows and the declaration always come from the brief *on main*, never from the branch
under review: a desk must not be able to weaken its own acceptance rows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from assay.errors import BadInput

DEFAULT_ROW_TIMEOUT_S = 600.0
_TOOL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")


# A holdout row's id in evidence records and tables (``assay.evidence.holdout``).
HOLDOUT_ROW = "holdout:"


@dataclass(frozen=True)
class RowSpec:
    """One acceptance row: its id, the command exactly as the brief wrote it, a timeout."""

    id: str
    command: str
    timeout_s: float = DEFAULT_ROW_TIMEOUT_S


@dataclass(frozen=True)
class EnvDecl:
    """The brief's single environment: interpreter version, lock files, tools."""

    python: str | None = None
    locks: tuple[str, ...] = ()
    tools: Mapping[str, str | None] = field(default_factory=dict)

    @property
    def declared(self) -> bool:
        return bool(self.python or self.locks or self.tools)


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def row_spec(row: Any, *, source: str = "brief") -> RowSpec:
    """A ``RowSpec`` from a brief's verify row (an object or a mapping with id/run)."""
    row_id = _get(row, "id")
    command = _get(row, "run", None) or _get(row, "command", None)
    if not isinstance(row_id, str) or not row_id:
        raise BadInput(f"{source}: verify row without an id")
    if not isinstance(command, str) or not command.strip():
        raise BadInput(f"{source}: verify row {row_id!r}: field 'run' must be a command")
    timeout = _get(row, "timeout_s", None) or _get(row, "timeout", None) or DEFAULT_ROW_TIMEOUT_S
    try:
        timeout_s = float(timeout)
    except (TypeError, ValueError) as exc:
        raise BadInput(f"{source}: verify row {row_id!r}: field 'timeout' must be seconds") from exc
    if timeout_s <= 0:
        raise BadInput(f"{source}: verify row {row_id!r}: field 'timeout' must be positive")
    return RowSpec(id=row_id, command=command, timeout_s=timeout_s)


def row_specs(rows: Iterable[Any], *, source: str = "brief") -> list[RowSpec]:
    """Every row of a brief, refusing duplicate ids."""
    specs = [row_spec(row, source=source) for row in rows]
    seen: set[str] = set()
    for spec in specs:
        if spec.id in seen:
            raise BadInput(f"{source}: verify row id {spec.id!r} appears twice")
        seen.add(spec.id)
    return specs


def _as_tuple(value: Any, *, source: str, name: str) -> tuple[str, ...]:
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Iterable) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise BadInput(f"{source}: env.{name} must be a path or a list of paths")


def _tools(value: Any, *, source: str) -> dict[str, str | None]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        items: list[tuple[Any, Any]] = list(value.items())
    elif isinstance(value, Iterable) and not isinstance(value, str | bytes):
        items = [(name, None) for name in value]
    else:
        raise BadInput(f"{source}: env.tools must be a list of names or a name->version map")
    tools: dict[str, str | None] = {}
    for name, version in items:
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            raise BadInput(f"{source}: env.tools: {name!r} is not a plain program name")
        tools[name] = None if version is None else str(version)
    return tools


def env_decl(env: Any, *, source: str = "brief") -> EnvDecl:
    """An ``EnvDecl`` from a brief's ``env`` (an object, a mapping, or None)."""
    if env is None:
        return EnvDecl()
    python = _get(env, "python", None)
    locks = _get(env, "locks", None) or _get(env, "lock", None)
    return EnvDecl(
        python=None if python in (None, "") else str(python),
        locks=_as_tuple(locks, source=source, name="lock"),
        tools=_tools(_get(env, "tools", None), source=source),
    )


def protect_globs(brief: Any) -> tuple[str, ...] | None:
    """The brief's ``protect:`` globs: None when it has none (the default pins apply)."""
    value = _get(brief, "protect", None)
    if value is None:
        return None
    return tuple(str(item) for item in value)
