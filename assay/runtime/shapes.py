"""Declared output shapes of steps: a pydantic model class or a JSON Schema (a dict).

Outputs are checked when a step runs and when it is replayed, so a shape mismatch is a
typed ``StepOutputError`` naming the step and the field, not a parse error later on.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TypeAlias

from assay.runtime.types import StepOutputError

if TYPE_CHECKING:
    from pydantic import BaseModel

# jsonschema and pydantic are imported when a shape is first checked: most runs declare
# none, and every CLI start would otherwise pay for both imports.
Shape: TypeAlias = "type[BaseModel] | dict[str, Any] | None"


def to_json_value(value: Any, *, label: str) -> Any:
    """``value`` as plain JSON data (what a replay returns), or ``StepOutputError``."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise StepOutputError(
            f"step {label}: output is not JSON data ({exc})", step=label
        ) from None


def check(value: Any, shape: Shape, *, label: str, recorded: bool) -> tuple[Any, Any]:
    """Validate a JSON value against ``shape``; return ``(what the code gets, JSON to record)``."""
    what = "recorded output" if recorded else "output"
    if shape is None:
        return value, value
    if isinstance(shape, dict):
        import jsonschema

        errors = sorted(
            jsonschema.Draft202012Validator(shape).iter_errors(value), key=lambda e: list(e.path)
        )
        if errors:
            first = errors[0]
            field = ".".join(str(p) for p in first.absolute_path) or "(root)"
            raise StepOutputError(
                f"step {label}: {what} field {field}: {first.message}", step=label, field=field
            )
        return value, value
    from pydantic import ValidationError

    try:
        model = shape.model_validate(value)
    except ValidationError as exc:
        first_error = exc.errors()[0]
        field = ".".join(str(p) for p in first_error["loc"]) or "(root)"
        raise StepOutputError(
            f"step {label}: {what} field {field}: {first_error['msg']}", step=label, field=field
        ) from None
    return model, model.model_dump(mode="json")
