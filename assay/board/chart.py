"""Inline SVG for the HTML board: a bar of briefs by state and a timeline of runs.

Drawn in Python rather than in a template so the geometry is computed once, exactly, and
the same board always yields the same bytes: coordinates are rounded to one decimal and
every text is XML-escaped here. No script, no external asset: the SVG is plain markup.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING
from xml.sax.saxutils import escape, quoteattr

from assay.forgestate.rows import BoardState, BriefRow
from assay.forgestate.times import iso, parse_time
from assay.states import COLOURS, FINISHED

if TYPE_CHECKING:
    from assay.board.runs import RunPage

STATE_COLOURS: dict[str, str] = {state.value: colour for state, colour in COLOURS.items()}

WIDTH = 960
TIMELINE_ROWS = 40


def _f(value: float) -> str:
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def state_bar(state: BoardState) -> str:
    """One horizontal bar split by state, with a legend; an empty board draws a note."""
    totals = state.totals()
    total = sum(count for _, count in totals.by_state)
    height = 64
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" id="state-chart" role="img" '
        f'width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}">',
        "<title>Briefs by state</title>",
    ]
    if total == 0:
        parts.append('<text x="0" y="20" font-size="13">no briefs</text>')
    x = 0.0
    legend_x = 0.0
    for name, count in totals.by_state:
        width = WIDTH * count / total
        colour = STATE_COLOURS.get(name, "#333333")
        label = f"{name}: {count}"
        parts.append(
            f'<rect class="bar" x="{_f(x)}" y="0" width="{_f(width)}" height="24" '
            f'fill="{colour}"><title>{escape(label)}</title></rect>'
        )
        x += width
        parts.append(
            f'<rect x="{_f(legend_x)}" y="36" width="12" height="12" fill="{colour}"/>'
            f'<text x="{_f(legend_x + 16)}" y="47" font-size="12">{escape(label)}</text>'
        )
        legend_x += 16 + 8 * len(label) + 18
    parts.append("</svg>")
    return "".join(parts)


def _started(row: BriefRow) -> datetime:
    assert row.run_started is not None
    return row.run_started


def _timeline_rows(state: BoardState) -> list[BriefRow]:
    with_runs = [row for row in state.rows if row.run_started is not None]
    # The most recently active runs are the interesting ones; ties broken by id.
    with_runs.sort(key=lambda r: (-(r.run_last or _started(r)).timestamp(), r.id))
    return sorted(with_runs[:TIMELINE_ROWS], key=lambda r: (_started(r), r.id))


def timeline(state: BoardState) -> str:
    """Each run's wall-clock span (pale) with the sessions that held a process (solid)."""
    rows = _timeline_rows(state)
    label_w = 180.0
    row_h = 16
    top = 20
    height = top + row_h * max(1, len(rows)) + 24
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" id="timeline" role="img" '
        f'width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}">',
        "<title>Runs: wall-clock age and seconds a process was held</title>",
    ]
    if not rows:
        parts.append(f'<text x="0" y="{top + 12}" font-size="13">no runs yet</text></svg>')
        return "".join(parts)
    start = min(row.run_started for row in rows if row.run_started is not None)
    end = max(state.as_of, *(row.run_last for row in rows if row.run_last is not None))
    span = max(1.0, (end - start).total_seconds())
    scale = (WIDTH - label_w - 10) / span

    def x_of(moment: datetime) -> float:
        return label_w + (moment - start).total_seconds() * scale

    parts.append(
        f'<text x="{_f(label_w)}" y="12" font-size="11">{escape(iso(start))}</text>'
        f'<text x="{WIDTH - 10}" y="12" font-size="11" text-anchor="end">'
        f"{escape(iso(end))}</text>"
    )
    for index, row in enumerate(rows):
        y = top + index * row_h
        assert row.run_started is not None
        run_end = row.run_last if row.state in FINISHED and row.run_last else state.as_of
        colour = STATE_COLOURS.get(row.state, "#333333")
        parts.append(
            f'<text x="0" y="{y + 11}" font-size="11">{escape(row.id[:28])}</text>'
            f'<rect class="run" x="{_f(x_of(row.run_started))}" y="{y + 2}" '
            f'width="{_f(max(1.0, x_of(run_end) - x_of(row.run_started)))}" height="10" '
            f'fill="{colour}" fill-opacity="0.25">'
            f"<title>{escape(f'{row.id}: {row.state}')}</title></rect>"
        )
        for session in row.sessions:
            title = f"{row.id}: process held {session.seconds:.1f}s (fence {session.fence})"
            parts.append(
                f'<rect class="held" x="{_f(x_of(session.start))}" y="{y + 2}" '
                f'width="{_f(max(1.0, x_of(session.end) - x_of(session.start)))}" '
                f'height="10" fill={quoteattr(colour)}><title>{escape(title)}</title></rect>'
            )
    shown = len(rows)
    total = sum(1 for row in state.rows if row.run_started is not None)
    note = f"{shown} of {total} runs shown (most recently active)" if total > shown else ""
    if note:
        parts.append(f'<text x="0" y="{height - 6}" font-size="11">{escape(note)}</text>')
    parts.append("</svg>")
    return "".join(parts)


STEP_COLOURS = {"model": "#1f77b4", "tool": "#2ca02c"}  # any other step: grey
STOP_COLOUR = "#d62728"


def run_strip(page: RunPage, as_of: datetime) -> str:
    """One run on one line: its wall-clock span (pale), the sessions a process held it
    (solid), a tick per finished step (model blue, tool green) and a red mark where a
    process stopped without closing the run."""
    row = page.row
    height = 44
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" id="run-strip" role="img" '
        f'width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}">',
        "<title>The run: sessions held, steps and where a process stopped</title>",
    ]
    if row.run_started is None:
        parts.append('<text x="0" y="20" font-size="13">no run yet</text></svg>')
        return "".join(parts)
    start = row.run_started
    finished = row.state in FINISHED and row.run_last is not None
    end = row.run_last if finished and row.run_last else max(as_of, row.run_last or start)
    span = max(1.0, (end - start).total_seconds())
    scale = (WIDTH - 20) / span

    def x_of(moment: datetime) -> float:
        return 10 + max(0.0, min(span, (moment - start).total_seconds())) * scale

    parts.append(
        f'<rect x="10" y="14" width="{_f(WIDTH - 20)}" height="14" fill="#999999" '
        f'fill-opacity="0.2"><title>{escape(f"{iso(start)} to {iso(end)}")}</title></rect>'
        f'<text x="10" y="10" font-size="10">{escape(iso(start))}</text>'
        f'<text x="{WIDTH - 10}" y="10" font-size="10" text-anchor="end">'
        f"{escape(iso(end))}</text>"
    )
    for session in row.sessions:
        title = f"process held {session.seconds:.1f}s (fence {session.fence})"
        parts.append(
            f'<rect class="held" x="{_f(x_of(session.start))}" y="14" '
            f'width="{_f(max(1.0, x_of(session.end) - x_of(session.start)))}" height="14" '
            f'fill="#999999" fill-opacity="0.6"><title>{escape(title)}</title></rect>'
        )
    for line in page.lines:
        moment = parse_time(line.row.time)
        if moment is None:
            continue
        x = _f(x_of(moment))
        if line.row.kind == "stopped":
            parts.append(
                f'<rect class="stop" x="{x}" y="8" width="3" height="26" '
                f'fill="{STOP_COLOUR}"><title>{escape(line.row.what)}</title></rect>'
            )
        elif line.row.kind == "step" and line.row.seq and line.row.status not in {"", "started"}:
            colour = STEP_COLOURS.get(line.row.what.split(":", 1)[0].split(" ", 1)[0], "#555555")
            parts.append(
                f'<rect class="step" x="{x}" y="30" width="2" height="8" fill="{colour}">'
                f"<title>{escape(f'{line.row.seq}: {line.row.what}')}</title></rect>"
            )
    parts.append("</svg>")
    return "".join(parts)
