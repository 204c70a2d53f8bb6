"""``assay board`` (BOARD.md and an HTML page) and ``assay status`` (the same, as a table)."""

from __future__ import annotations

import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from assay.cli.options import forge_option, json_option, print_result
from assay.console import fitted_table, out
from assay.errors import BadInput


def _now(value: str | None) -> datetime | None:
    from assay.forgestate.times import parse_time

    if value is None:
        return None
    moment = parse_time(value)
    if moment is None:
        raise BadInput(f"--now: {value!r} is not an ISO-8601 time (e.g. 2026-01-02T03:04:05Z)")
    return moment


def _write(path: Path, text: str) -> None:
    """Write through a temporary file so a reader never sees half a board."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)


@click.command("board")
@click.option("--out", "out_path", default="BOARD.md", metavar="PATH", help="Markdown output.")
@click.option(
    "--html",
    "html_path",
    default=None,
    metavar="PATH",
    help="The HTML page (default: board.html beside --out).",
)
@click.option("--no-html", "no_html", is_flag=True, help="Write BOARD.md only.")
@click.option(
    "--templates",
    default=None,
    metavar="DIR",
    help="Template folder (default: board_templates/ on main, else the shipped ones).",
)
@click.option(
    "--now",
    default=None,
    metavar="ISO",
    help="Draw the board as of this time (default: the latest instant the forge records).",
)
@forge_option
@json_option
def board(
    out_path: str,
    html_path: str | None,
    no_html: bool,
    templates: str | None,
    now: str | None,
    forge: str | None,
    as_json: bool,
) -> None:
    """Render BOARD.md and an HTML page (board.html) from main, claims, journals and evidence.

    Beside the HTML page, runs/<brief>.html for every brief with a branch: its run as a
    timeline (each model call with what the model said, each tool step with its output and
    what it cost, where a process stopped and resumed, the evidence), linked from the board.
    """
    from assay.board.render import render_html, render_markdown, render_run_pages
    from assay.board.runs import RUNS_DIR, RunPage, build_run_pages
    from assay.forge import open_forge
    from assay.forgestate.rows import collect_snapshot

    if no_html and html_path:
        raise BadInput("board: give --html PATH or --no-html, not both")
    if not no_html and html_path is None:
        html_path = str(Path(out_path).with_name("board.html"))

    template_dir = Path(templates) if templates else None
    runs: list[RunPage] = []
    pages: dict[str, str] = {}
    with open_forge(forge) as handle:
        snapshot, state = collect_snapshot(handle, now=_now(now))
        main_templates = dict(snapshot.templates)
        if html_path:
            with tempfile.TemporaryDirectory(prefix="assay-board-") as scratch:
                runs = build_run_pages(handle, snapshot, state, Path(scratch))
            pages = render_run_pages(
                runs,
                state,
                board_href=Path(html_path).name,
                templates=template_dir,
                main_templates=main_templates,
            )
    markdown = render_markdown(state, templates=template_dir, main_templates=main_templates)
    html = (
        render_html(
            state,
            templates=template_dir,
            main_templates=main_templates,
            runs={page.row.id: page.href for page in runs},
        )
        if html_path
        else None
    )
    _write(Path(out_path), markdown)
    if html_path and html is not None:
        beside = Path(html_path).parent
        for name, text in pages.items():
            _write(beside / name, text)
        _write(Path(html_path), html)
    totals = state.totals()
    if as_json:
        print_result(
            {
                "status": "ok",
                "code": 0,
                "out": out_path,
                "html": html_path,
                "runs": len(pages),
                "briefs": totals.briefs,
                "as_of": state.to_json()["as_of"],
            }
        )
    else:
        written = f"{out_path}" + (f" and {html_path}" if html_path else "")
        if pages:
            folder = Path(html_path or "").parent / RUNS_DIR
            written += f" (and {len(pages)} run page(s) in {folder})"
        out.print(f"wrote {written}: {totals.briefs} brief(s)", markup=False, highlight=False)


# Left out first when the terminal is narrow: totals are in the summary line below, and a
# left-out note is printed under the table instead (``_notes``).
STATUS_DROP = (
    "held",
    "age",
    "at",
    "tokens",
    "lease age",
    "calls",
    "cost",
    "steps",
    "note",
    "fence",
)


def _notes(table: Table, data: dict[str, Any]) -> list[str]:
    """``brief: note`` lines for a table too narrow for its note column."""
    if any(column.header == "note" for column in table.columns):
        return []
    return [f"{row['id']}: {row['status_note']}" for row in data["briefs"] if row["status_note"]]


def _status_table(data: dict[str, Any], *, width: int | None = None) -> Table:
    from assay.board.render import money
    from assay.forgestate.times import duration

    headers = (
        "brief",
        "state",
        "desk",
        "fence",
        "lease age",
        "last step",
        "at",
        "steps",
        "calls",
        "tokens",
        "cost",
        "evidence",
        "age",
        "held",
        "note",
    )
    rows = [
        (
            row["id"],
            row["state"],
            row["desk"] or "-",
            f"{row['fence']}/{row['attempt']}",
            duration(row["lease_age_s"]),
            row["last_step"] or "-",
            row["last_step_at"] or "-",
            str(row["steps"]),
            str(row["model_calls"])
            + (f"+{row['repeated_requests']}" if row["repeated_requests"] else ""),
            str(row["tokens"]),
            money(row["usd"]),
            row["evidence"]["label"],
            duration(row["run_age_s"]),
            duration(row["held_s"]),
            row["status_note"] or "",
        )
        for row in data["briefs"]
    ]
    return fitted_table(
        headers,
        rows,
        drop=STATUS_DROP,
        width=width,
        floors={"last step": 16, "note": 30},
        title=f"as of {data['as_of']}",
        title_justify="left",
    )


@click.command("status")
@click.option("--now", default=None, metavar="ISO", help="Judge leases as of this time.")
@forge_option
@json_option
def status(now: str | None, forge: str | None, as_json: bool) -> None:
    """Every brief's state, desk, lease, last step, usage and evidence, as a table."""
    from assay.forge import open_forge
    from assay.forgestate.rows import collect_board

    moment = _now(now) or datetime.now().astimezone()
    state, _ = collect_board(open_forge(forge), now=moment)
    data = state.to_json()
    if as_json:
        print_result({"status": "ok", "code": 0, **data})
        return
    table = _status_table(data)
    out.print(table)
    # Wrapped between words at the terminal's width, as the table is (80 columns fit).
    for line in _notes(table, data):
        out.print(line, markup=False, highlight=False, soft_wrap=False)
    totals = data["totals"]
    line = f"{totals['briefs']} brief(s): " + ", ".join(
        f"{state} {count}" for state, count in totals["by_state"].items()
    )
    if totals["repeated_requests"]:  # "calls" shows them as "+N"
        line += (
            f"; {totals['repeated_requests']} model request(s) sent upstream again "
            "(in flight when a process stopped)"
        )
    if totals["repaid_model_calls"]:
        line += (
            f"; {totals['repaid_model_calls']} model call(s) paid again (a machine was lost "
            "before they reached the forge)"
        )
    out.print(line, markup=False, highlight=False, soft_wrap=False)


def register(root: click.Group) -> None:
    """Add ``assay board`` and ``assay status`` to the root group."""
    root.add_command(board)
    root.add_command(status)
