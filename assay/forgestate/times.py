"""Times as the forge's records spell them, and as the board and the sweepers show them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def iso(moment: datetime) -> str:
    """``2026-01-02T03:04:05Z``: UTC, whole seconds, the one spelling the board uses."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: Any) -> datetime | None:
    """An ISO-8601 string (``Z`` or offset; naive means UTC) as an aware datetime, else None."""
    if not isinstance(value, str) or not value:
        return None
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def duration(seconds: float | None) -> str:
    """``45s``, ``12m05s``, ``3h07m``, ``2d04h``; ``-`` for unknown."""
    if seconds is None:
        return "-"
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"
