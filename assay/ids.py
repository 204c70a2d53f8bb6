"""Brief and desk identifiers: the one place that decides which names are safe.

Ids become parts of git ref names (``refs/assay/claims/<brief>``), branch names
(``assay/<brief>``) and paths (``.assay/journal/<brief>/``), so anything that could
escape those (slashes, ``..``, control characters) is refused before it is used.
"""

from __future__ import annotations

import re

from assay.errors import BadInput

MAX_ID_LENGTH = 100
_ID_PATTERN = re.compile(r"[A-Za-z0-9_.-]+")


def check_id(value: str, *, what: str = "brief id", where: str = "") -> str:
    """Return ``value`` if it is a safe id, else raise ``BadInput`` naming it."""
    place = f"{where}: " if where else ""
    if not isinstance(value, str) or not value:
        raise BadInput(f"{place}{what} must be a non-empty string")
    if len(value) > MAX_ID_LENGTH:
        raise BadInput(f"{place}{what} {value[:20]!r}... is over {MAX_ID_LENGTH} characters")
    if not _ID_PATTERN.fullmatch(value):
        raise BadInput(f"{place}{what} {value!r} may hold only letters, digits, '-', '_' and '.'")
    if value in {".", ".."} or ".." in value or value.startswith(".") or value.endswith(".lock"):
        raise BadInput(f"{place}{what} {value!r} is not a safe git ref component")
    return value
