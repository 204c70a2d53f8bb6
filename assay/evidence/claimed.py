"""What the desk claims about its evidence, read from its journal, and the journal's anchors.

The desk records its belief as a ``compute`` step named ``evidence.claimed`` whose output
is ``{"rows": [{"row", "result": "pass" | "fail", "note"}], "env_fingerprint": {...}}``
(docs/internals.md). The latest such step wins. Claims are shown next to what the gate
verified; they never count towards a merge.

The journal's *anchors* are the hashes of its lines: every evidence record carries the
journal head it saw, and a later journal that no longer contains that hash was rewritten.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from assay.journal.fold import CLAIM_STEP, fold

__all__ = ["CLAIM_STEP", "Claimed", "ClaimedRow", "claimed_from_entries", "journal_anchors"]


@dataclass(frozen=True)
class ClaimedRow:
    row: str
    result: str
    note: str = ""


@dataclass(frozen=True)
class Claimed:
    """The desk's latest claim: a result per row and the fingerprint it worked in."""

    rows: Mapping[str, ClaimedRow] = field(default_factory=dict)
    env_fingerprint: Mapping[str, str] | None = None
    seq: int | None = None


def _claim_output(entry: Mapping[str, Any], load_blob: Callable[[str], Any] | None) -> Any:
    """The step's output: the journal packs it as ``{"value": v}`` or ``{"blob": ref}``."""
    out = entry.get("out")
    if isinstance(out, Mapping) and set(out) == {"value"}:
        return out["value"]
    if isinstance(out, Mapping) and set(out) == {"blob"}:
        return load_blob(str(out["blob"])) if load_blob is not None else None
    return out


def claimed_from_entries(
    entries: Sequence[Mapping[str, Any]],
    *,
    load_blob: Callable[[str], Any] | None = None,
) -> Claimed:
    """The latest ``evidence.claimed`` step's content; an empty ``Claimed`` when none.

    Malformed claims are ignored rather than fatal: a claim is only ever displayed, and a
    desk cannot make the gate fail by writing nonsense in its own journal.
    """
    entry = fold(entries).claim_step
    if entry is None:
        return Claimed()
    output = _claim_output(entry, load_blob)
    if not isinstance(output, Mapping):
        return Claimed()
    rows: dict[str, ClaimedRow] = {}
    for item in output.get("rows") or []:
        if isinstance(item, Mapping) and isinstance(item.get("row"), str):
            rows[item["row"]] = ClaimedRow(
                row=item["row"],
                result=str(item.get("result", "")),
                note=str(item.get("note", "")),
            )
    fp = output.get("env_fingerprint")
    fingerprint = (
        {str(k): str(v) for k, v in fp.items()} if isinstance(fp, Mapping) and fp else None
    )
    seq = entry.get("seq")
    return Claimed(
        rows=rows, env_fingerprint=fingerprint, seq=seq if isinstance(seq, int) else None
    )


def journal_anchors(entries: Sequence[Mapping[str, Any]], head: str) -> frozenset[str]:
    """Every line hash of a verified journal (each line's ``sum``, and the ``prev`` naming
    the line before it)."""
    hashes = {str(entry["sum"]) for entry in entries if entry.get("sum")}
    hashes |= {str(entry["prev"]) for entry in entries[1:] if entry.get("prev")}
    if head:
        hashes.add(head)
    return frozenset(hashes)
