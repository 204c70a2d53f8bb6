"""The brief file format: ``briefs/<id>.md`` is YAML front matter plus a Markdown body.

```
---
id: add-function
title: Add a median() function
labels: [python]
priority: 2
depends_on: [setup-package]
verify:
  - id: unit
    run: pytest -q tests/test_stats.py
    timeout: 120
env: {python: "3.11", lock: requirements.lock, tools: [pytest]}
budget: {steps: 40, model_calls: 20, usd: 0.5}
approval: true
protect: ["tests/**"]       # restored from main before the rows run (default: what they name)
holdout: [edge-cases]       # holdout rows sealed for the gate (assay holdout add): required
---
Markdown body: what to do and why.
```

This module owns the pydantic models of a brief and ``parse_brief()``; loading a whole
tree (duplicates, dependency cycles) is ``assay.briefs.tree``. Every failure is a
``BadInput`` naming the file, the front-matter line and the field.
"""

from __future__ import annotations

import re
import shlex
from pathlib import PurePosixPath
from typing import Annotated, Any

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
)

from assay.briefs.yamldoc import load_yaml, validation_error
from assay.errors import BadInput
from assay.ids import check_id

MAX_BRIEF_BYTES = 1024 * 1024


class StrictModel(BaseModel):
    """Frozen, strict and closed: unknown fields are refused by name."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _safe_id(value: str, what: str) -> str:
    try:
        return check_id(value, what=what)
    except BadInput as exc:
        raise ValueError(exc.message) from None


def _command(value: str, what: str) -> str:
    if not value.strip():
        raise ValueError(f"{what} must be a non-empty command")
    if "\x00" in value:
        raise ValueError(f"{what} must not contain NUL characters")
    try:
        argv = shlex.split(value)
    except ValueError as exc:
        raise ValueError(f"{what} is not a valid command line: {exc}") from None
    if not argv:
        raise ValueError(f"{what} must be a non-empty command")
    return value


def _relative_path(value: str) -> str:
    path = PurePosixPath(value)
    if not value or value.startswith(("/", "\\")) or ".." in path.parts or "\x00" in value:
        raise ValueError(f"{value!r} must be a relative path inside the repository")
    return value


def _one_or_many(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


def _int_as_text(value: Any) -> Any:
    # `id: 42` (a GitHub issue number, say) is meant as the text "42"; floats are not
    # converted because YAML has already lost their spelling (3.10 became 3.1).
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


def _ints_as_text(value: Any) -> Any:
    return [_int_as_text(item) for item in value] if isinstance(value, list) else value


Text = Annotated[str, BeforeValidator(_int_as_text)]
TextList = Annotated[list[str], BeforeValidator(_ints_as_text)]


def _version_string(value: Any) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        # YAML reads 3.10 as the float 3.1; refuse it instead of guessing.
        raise ValueError(f'write the version as a quoted string, e.g. python: "{value}"')
    return value


# Every number has a ceiling, so no brief can hold a value that overflows a clock or a
# counter downstream (a lease of 1e23 s, a timeout past the end of time).
MAX_COUNT = 10**9
MAX_TOKENS = 10**12
MAX_USD = 10.0**6
MAX_TIMEOUT_S = 7 * 86400.0
MAX_WALL_S = 365 * 86400.0
MAX_PRIORITY = 10**6

NonNegInt = Annotated[int, Field(ge=0, le=MAX_COUNT)]
NonNegFloat = Annotated[float, Field(ge=0, le=MAX_WALL_S, allow_inf_nan=False)]
Timeout = Annotated[float, Field(gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)]


class VerifyRow(StrictModel):
    """One acceptance check: a command the independent gate re-runs on the head commit."""

    id: str
    run: str
    timeout: Timeout | None = None

    @field_validator("id")
    @classmethod
    def _check_row_id(cls, value: str) -> str:
        return _safe_id(value, "verify row id")

    @field_validator("run")
    @classmethod
    def _check_run(cls, value: str) -> str:
        return _command(value, "run")

    @property
    def argv(self) -> list[str]:
        """The command split as a POSIX shell would split words, without running a shell."""
        return shlex.split(self.run)


class EnvSpec(StrictModel):
    """The single environment a brief is authored and verified in."""

    python: Annotated[str | None, BeforeValidator(_version_string)] = None
    lock: Annotated[list[str], BeforeValidator(_one_or_many)] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list)

    @field_validator("lock")
    @classmethod
    def _check_locks(cls, value: list[str]) -> list[str]:
        return [_relative_path(item) for item in value]

    @field_validator("tools")
    @classmethod
    def _check_tools(cls, value: list[str]) -> list[str]:
        for tool in value:
            if not re.fullmatch(r"[A-Za-z0-9_.+-]+", tool):
                raise ValueError(f"tool {tool!r} must be a plain program name")
        return value


class BudgetSpec(StrictModel):
    """Limits of one run; ``None`` means unlimited. Exhausting one pauses the run."""

    steps: NonNegInt | None = None
    model_calls: NonNegInt | None = None
    tokens: Annotated[int, Field(ge=0, le=MAX_TOKENS)] | None = None
    usd: Annotated[float, Field(ge=0, le=MAX_USD, allow_inf_nan=False)] | None = None
    wall_s: NonNegFloat | None = None

    def tightest(self, other: BudgetSpec | None) -> BudgetSpec:
        """The per-field minimum of two budgets (a desk's and a brief's, say)."""
        if other is None:
            return self
        merged: dict[str, Any] = {}
        for name in type(self).model_fields:
            mine, theirs = getattr(self, name), getattr(other, name)
            values = [v for v in (mine, theirs) if v is not None]
            merged[name] = min(values) if values else None
        return BudgetSpec(**merged)

    def to_json(self) -> dict[str, Any]:
        """Only the limits that are set."""
        return self.model_dump(exclude_none=True)


class Objective(StrictModel):
    """A standing objective: re-run until ``judge`` exits 0, at most ``max_runs`` times."""

    judge: str
    max_runs: Annotated[int, Field(ge=1, le=1000)] = 3
    budget: BudgetSpec | None = None
    timeout: Timeout | None = None

    @field_validator("judge")
    @classmethod
    def _check_judge(cls, value: str) -> str:
        return _command(value, "judge")

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.judge)


class FrontMatter(StrictModel):
    """The fields a brief's front matter may hold (and nothing else)."""

    id: Text
    title: Text
    desk: Annotated[str | None, BeforeValidator(_int_as_text)] = None
    labels: TextList = Field(default_factory=list)
    priority: Annotated[int, Field(ge=-MAX_PRIORITY, le=MAX_PRIORITY)] = 0
    depends_on: TextList = Field(default_factory=list)
    verify: list[VerifyRow] = Field(default_factory=list)
    env: EnvSpec = Field(default_factory=EnvSpec)
    # Paths (globs) the gate restores from main before it runs the rows, beside the ones
    # the rows name; ``[]`` pins nothing (a brief whose agent writes its own tests).
    protect: list[str] | None = None
    budget: BudgetSpec = Field(default_factory=BudgetSpec)
    objective: Objective | None = None
    approval: bool = False  # wait for ``assay approve`` before ``finish`` takes effect
    # The ids of the holdout rows the author sealed (``assay holdout add``): the gate refuses
    # while one is not on the holdout ref, which a desk job can delete or roll back where
    # custom refs are unprotected (GitHub).
    holdout: TextList = Field(default_factory=list)

    @field_validator("id")
    @classmethod
    def _check_brief_id(cls, value: str) -> str:
        return _safe_id(value, "brief id")

    @field_validator("desk")
    @classmethod
    def _check_desk(cls, value: str | None) -> str | None:
        return None if value is None else _safe_id(value, "desk name")

    @field_validator("title")
    @classmethod
    def _check_title(cls, value: str) -> str:
        value = value.strip()
        if not value or "\n" in value or len(value) > 300:
            raise ValueError("title must be one non-empty line of at most 300 characters")
        return value

    @field_validator("labels")
    @classmethod
    def _check_labels(cls, value: list[str]) -> list[str]:
        for label in value:
            if not label.strip() or "\n" in label or len(label) > 100:
                raise ValueError(f"label {label!r} must be one non-empty line")
        return list(dict.fromkeys(label.strip() for label in value))

    @field_validator("protect")
    @classmethod
    def _check_protect(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        return [_relative_path(item) for item in value]

    @field_validator("holdout")
    @classmethod
    def _check_holdout(cls, value: list[str]) -> list[str]:
        for row in value:
            _safe_id(row, "holdout row id")
        if len(set(value)) != len(value):
            raise ValueError("a holdout row is listed twice")
        return value

    @field_validator("depends_on")
    @classmethod
    def _check_depends_on(cls, value: list[str]) -> list[str]:
        for dep in value:
            _safe_id(dep, "dependency id")
        if len(set(value)) != len(value):
            raise ValueError("a dependency is listed twice")
        return value


APPROVAL_LABEL = "approval"  # a brief labelled so needs approval as if it set ``approval: true``


class Brief(FrontMatter):
    """One unit of work, as parsed from ``briefs/<id>.md`` (or built by a forge adapter)."""

    body: str = ""
    source: str = ""
    _lines: dict[str, int] = PrivateAttr(default_factory=dict)

    def line_of(self, path: str) -> int:
        """The front-matter line of a field path such as ``depends_on[1]`` (0 if unknown)."""
        return self._lines.get(path, 0)

    @property
    def needs_approval(self) -> bool:
        """Whether the brief itself asks for ``assay approve`` before it may finish and
        merge: ``approval: true`` or the label ``approval``. The desks wait for it and the
        merge rule checks it, whatever the desk's kind."""
        return self.approval or APPROVAL_LABEL in self.labels

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (``env.lock`` always a list)."""
        return self.model_dump(mode="json")


FRONT_MATTER_FIELDS = tuple(FrontMatter.model_fields)


def split_front_matter(text: str, *, source: str) -> tuple[str, str]:
    """Return (YAML text, Markdown body); the YAML starts on file line 2."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != "---":
        raise BadInput(
            f"{source} line 1: a brief starts with a '---' line opening its YAML front matter",
            source=source,
        )
    for index in range(1, len(lines)):
        if lines[index].rstrip() in ("---", "..."):
            body = "\n".join(lines[index + 1 :]).strip("\n")
            return "\n".join(lines[1:index]), body.rstrip() + ("\n" if body.strip() else "")
    raise BadInput(
        f"{source} line {len(lines)}: the front matter is not closed by a '---' line",
        source=source,
    )


def parse_brief(text: str, *, source: str) -> Brief:
    """Parse and validate one brief; ``source`` (e.g. ``briefs/x.md``) names it in errors.

    When ``source`` ends in ``.md`` the front matter's ``id`` must equal the file's stem.
    """
    if len(text) > MAX_BRIEF_BYTES:
        raise BadInput(f"{source}: over {MAX_BRIEF_BYTES} bytes", source=source)
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    front, body = split_front_matter(text, source=source)
    doc = load_yaml(front, source=source, line_offset=1)
    if doc.data is None:
        raise BadInput(f"{source} line 2: the front matter is empty", source=source)
    if not isinstance(doc.data, dict):
        raise doc.bad([], "the front matter must be a mapping of fields")
    for reserved in ("body", "source"):
        if reserved in doc.data:
            raise doc.bad([reserved], "unknown field (the body follows the front matter)")
    try:
        front_matter = FrontMatter.model_validate(doc.data)
    except ValidationError as exc:
        raise validation_error(exc, doc) from None
    name = PurePosixPath(source).name
    if name.endswith(".md") and name[: -len(".md")] != front_matter.id:
        raise doc.bad(["id"], f"{front_matter.id!r} does not match the file name {name!r}")
    if front_matter.id in front_matter.depends_on:
        raise doc.bad(["depends_on"], "a brief cannot depend on itself")
    seen: dict[str, int] = {}
    for index, row in enumerate(front_matter.verify):
        if row.id in seen:
            raise doc.bad(["verify", index, "id"], f"row id {row.id!r} is used twice")
        seen[row.id] = index
    brief = Brief(**dict(front_matter), body=body, source=source)
    brief._lines.update(
        {f"depends_on[{i}]": doc.line_of(["depends_on", i]) for i in range(len(brief.depends_on))}
    )
    brief._lines["id"] = doc.line_of(["id"])
    return brief


def render_brief(brief: FrontMatter | Brief, *, body: str | None = None) -> str:
    """The file text of a brief: front matter with the fields that differ from defaults."""
    data = FrontMatter.model_validate(
        {name: getattr(brief, name) for name in FRONT_MATTER_FIELDS}
    ).model_dump(mode="json", exclude_defaults=True)
    data = {"id": brief.id, "title": brief.title, **data}
    text = "---\n" + yaml.safe_dump(data, sort_keys=False, allow_unicode=True) + "---\n"
    content = body if body is not None else getattr(brief, "body", "")
    return text + (f"\n{content.strip()}\n" if content.strip() else "")
