"""The claimed-versus-verified table: Markdown for review bodies, rich for the terminal.

The review body holds the table between two markers, so regenerating it (each time the
desk claims or the gate verifies) replaces exactly that block and nothing the desk wrote.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from assay.console import fitted_table
from assay.evidence.rule import MergeDecision, RowStatus, Verdict
from assay.evidence.spec import HOLDOUT_ROW

BEGIN = "<!-- assay:evidence:begin -->"
END = "<!-- assay:evidence:end -->"
_PINNED_SHOWN = 30


def _cell(text: str | None) -> str:
    if not text:
        return "—"
    return text.replace("|", "\\|").replace("\n", " ")


def _verdict(status: RowStatus) -> str:
    word = status.verdict.value
    return f"**{word}**" if status.verdict is Verdict.PASS else word


def render_markdown(decision: MergeDecision) -> str:
    """The table as Markdown, with a one-line verdict above it."""
    head = decision.head_sha[:12] or "—"
    if decision.allowed:
        summary = f"Evidence: every row verified passing at `{head}`; mergeable."
    else:
        summary = f"Evidence at `{head}`: not mergeable."
    lines = [
        summary,
        "",
        "| row | command | claimed | verified | at | verdict |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for status in decision.rows:
        at = f"`{status.at[:12]}`" if status.at else "—"
        lines.append(
            f"| {_cell(status.row)} | `{_cell(status.command)}` | {_cell(status.claimed)} "
            f"| {_cell(status.verified)} | {at} | {_verdict(status)} |"
        )
    for problem in decision.problems:
        lines.append("")
        lines.append(f"- {_cell(problem)}")
    findings = [
        f"- row `{_cell(status.row)}`: {_cell(finding)}"
        for status in decision.rows
        if status.record is not None and status.verdict is Verdict.FAILING
        for finding in status.record.findings
    ]
    if findings:
        lines += ["", *findings]
    pinned = pinned_files(decision)
    if pinned:
        shown = ", ".join(f"`{_cell(p)}`" for p in pinned[:_PINNED_SHOWN])
        more = f" and {len(pinned) - _PINNED_SHOWN} more" if len(pinned) > _PINNED_SHOWN else ""
        lines += ["", f"Files the rows ran as main has them (pinned): {shown}{more}."]
    notes = row_notes(decision)
    if notes:
        lines.append("")
        lines += [f"- {_cell(note)}" for note in notes]
    holdout = holdout_summary(decision)
    if holdout:
        lines += ["", f"{holdout} (rows the desk never saw; their commands stay sealed)."]
    return "\n".join(lines) + "\n"


def holdout_summary(decision: MergeDecision) -> str:
    """``holdout: 2 of 3 pass`` ("" when the brief has no holdout rows)."""
    rows = [status for status in decision.rows if status.row.startswith(HOLDOUT_ROW)]
    if not rows:
        return ""
    passed = sum(status.verdict is Verdict.PASS for status in rows)
    return f"holdout: {passed} of {len(rows)} pass"


def row_notes(decision: MergeDecision) -> list[str]:
    """What the current records ask the review to say (files the desk changed in the
    acceptance set, ``protect: []``, rows judged by exit code alone), once each."""
    found: list[str] = []
    for status in decision.rows:
        if status.record is None:
            continue
        for note in status.record.notes:
            if note not in found:
                found.append(note)
    return found


def pinned_files(decision: MergeDecision) -> list[str]:
    """Every path the gate restored from main for the rows' current records."""
    found: set[str] = set()
    for status in decision.rows:
        if status.record is not None:
            found.update(status.record.pinned)
    return sorted(found)


def table_in(body: str) -> str | None:
    """The evidence block's text in ``body`` (None when it has none)."""
    start = body.find(BEGIN)
    end = body.find(END, start + len(BEGIN)) if start >= 0 else -1
    if start < 0 or end < 0:
        return None
    return body[start + len(BEGIN) : end].strip("\n")


def pending_table(head_sha: str) -> str:
    """What a review says before the gate has judged ``head_sha``."""
    return (
        f"Evidence at `{head_sha[:12] or '—'}`: not verified yet; the gate re-runs every row "
        "on this commit (`assay verify`), and only its records count.\n"
    )


def with_table(body: str, table: str) -> str:
    """``body`` with its evidence block replaced by ``table`` (appended when absent)."""
    block = f"{BEGIN}\n{table.rstrip()}\n{END}"
    start = body.find(BEGIN)
    end = body.find(END, start + len(BEGIN)) if start >= 0 else -1
    if start >= 0 and end >= 0:
        return body[:start] + block + body[end + len(END) :]
    separator = (
        "" if not body or body.endswith("\n\n") else ("\n" if body.endswith("\n") else "\n\n")
    )
    return f"{body}{separator}{block}\n"


_STYLE = {
    Verdict.PASS: "green",
    Verdict.FAILING: "red",
    Verdict.MISSING: "yellow",
    Verdict.STALE: "yellow",
    Verdict.ENV_MISMATCH: "red",
}


def render_rich(decision: MergeDecision) -> Table:
    """The table for the terminal."""
    # Row text comes from briefs and journals: plain Text, never rich markup.
    rows = [
        (
            Text(status.row),
            Text(status.command),
            Text(status.claimed or "—"),
            Text(status.verified or "—"),
            Text((status.at or "")[:12] or "—"),
            Text(status.verdict.value, style=_STYLE[status.verdict]),
            Text(status.reason),
        )
        for status in decision.rows
    ]
    return fitted_table(
        ("row", "command", "claimed", "verified", "at", "verdict", "why"),
        rows,
        drop=("at", "claimed", "command"),
        floors={"why": 20},
        title=f"evidence for {decision.brief} at {decision.head_sha[:12]}",
    )
