"""Small helpers for journal tests: write a journal of given entries, flip bytes."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from assay.journal import JournalWriter


def write_entries(
    directory: Path, entries: Iterable[dict[str, Any]], **options: Any
) -> list[dict[str, Any]]:
    """Append ``entries`` to a fresh journal in ``directory``; return the lines written."""
    with JournalWriter.open(directory, run_id="run-test", **options) as writer:
        return [writer.append(entry) for entry in entries]


def flip(path: Path, index: int, value: int) -> None:
    """Replace the byte at ``index`` of ``path`` with ``value`` (must differ)."""
    data = bytearray(path.read_bytes())
    assert data[index] != value
    data[index] = value
    path.write_bytes(bytes(data))
