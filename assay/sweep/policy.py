"""Sweeper policies: ``sweepers/*.yaml``, one file a sweeper, each naming its kind.

A policy file is validated whole before any sweep runs: an unknown kind, an unknown key or a
value of the wrong type is a ``BadInput`` (exit 65) naming the file and the field, so a typo
in a policy can never make a sweep silently do less than intended.

Example (``sweepers/stuck-claims.yaml``)::

    kind: stuck-claims
    skew_s: 30
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from assay.briefs.yamldoc import load_yaml
from assay.claims.record import MAX_LEASE_S, MAX_SKEW_S
from assay.errors import BadInput

KINDS: tuple[str, ...] = ("stuck-claims", "waker", "orphans", "budgets", "honest-status")


class SweepPolicy(BaseModel):
    """Fields every policy has: a name (default: the file stem) and an on/off switch."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    name: str = ""  # defaults to the file's stem
    enabled: bool = True


class StuckClaimsPolicy(SweepPolicy):
    """Held claims whose lease ran out (plus skew): mark ``stuck``, release for resume."""

    kind: Literal["stuck-claims"]
    skew_s: float = Field(default=30.0, ge=0, le=MAX_SKEW_S, allow_inf_nan=False)


class WakerPolicy(SweepPolicy):
    """Waiting runs whose event or timer has arrived: dispatch the desk again."""

    kind: Literal["waker"]
    dispatch: Literal["local", "none"] = "local"
    # A wake already dispatched for the same event is not repeated until this long has
    # passed without the run taking its claim back (the dispatched process may have died).
    redispatch_after_s: float = Field(default=300.0, ge=0, le=MAX_LEASE_S, allow_inf_nan=False)
    max_dispatch: int = Field(default=20, ge=0, le=10_000)
    # Passed to the woken desk as ``--desks`` (relative paths: from the sweep's directory).
    desks_dir: str | None = None


class OrphansPolicy(SweepPolicy):
    """Branches without brief or claim, claims without brief, reviews without branch."""

    kind: Literal["orphans"]
    fix: bool = False  # delete what is reported (also `assay sweep --fix`)


class BudgetsPolicy(SweepPolicy):
    """Runs and objectives paused on budget: report what was spent."""

    kind: Literal["budgets"]


class HonestStatusPolicy(SweepPolicy):
    """Status records still saying "working" for a brief whose claim is not live: correct them."""

    kind: Literal["honest-status"]
    skew_s: float = Field(default=30.0, ge=0, le=MAX_SKEW_S, allow_inf_nan=False)


Policy = Annotated[
    StuckClaimsPolicy | WakerPolicy | OrphansPolicy | BudgetsPolicy | HonestStatusPolicy,
    Field(discriminator="kind"),
]
_ADAPTER: TypeAdapter[Any] = TypeAdapter(Policy)


def parse_policy(data: Any, *, source: str) -> SweepPolicy:
    """Validate one policy document; ``BadInput`` names ``source`` and the failing field."""
    if not isinstance(data, Mapping):
        raise BadInput(f"{source}: a sweeper policy must be a mapping with a 'kind' field")
    kind = data.get("kind")
    if kind not in KINDS:
        raise BadInput(
            f"{source}: field 'kind': {kind!r} is not one of {', '.join(KINDS)}",
            file=source,
            field="kind",
        )
    try:
        policy: SweepPolicy = _ADAPTER.validate_python(dict(data))
    except ValidationError as invalid:
        first = invalid.errors()[0]
        # The discriminator is the first element of the location; the rest is the field.
        location = [str(part) for part in first["loc"] if str(part) != kind]
        field = ".".join(location) or "kind"
        raise BadInput(
            f"{source}: field {field!r}: {first['msg']}", file=source, field=field
        ) from invalid
    if not policy.name:
        policy = policy.model_copy(update={"name": Path(source).stem})
    return policy


def load_policies(directory: Path) -> list[SweepPolicy]:
    """Every ``*.yaml`` / ``*.yml`` in ``directory``, sorted by file name, enabled or not."""
    if not directory.is_dir():
        raise BadInput(f"--sweepers: {directory} is not a directory", field="--sweepers")
    found: list[SweepPolicy] = []
    names: dict[str, str] = {}
    for path in sorted([*directory.glob("*.yaml"), *directory.glob("*.yml")]):
        source = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as broken:
            raise BadInput(f"{source}: not valid YAML: {broken}", file=source) from broken
        data = load_yaml(text, source=source).data
        policy = parse_policy(data, source=source)
        if policy.name in names:
            raise BadInput(
                f"{source}: field 'name': {policy.name!r} is already used by {names[policy.name]}",
                file=source,
                field="name",
            )
        names[policy.name] = source
        found.append(policy)
    return found


def default_policies() -> list[SweepPolicy]:
    """One policy of each kind with its defaults (when no ``sweepers/`` folder exists)."""
    return [parse_policy({"kind": kind}, source=f"{kind}.yaml") for kind in KINDS]
