"""Tables stay legible in a narrow terminal: fewer columns, never one character per line."""

from __future__ import annotations

import io

from rich.console import Console

from assay.cli.board import _notes, _status_table
from assay.console import fitted_table
from tests.board.states import synthetic_board


def _render(table: object, width: int) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(table)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(text, str)
    return text


def _column_widths(text: str) -> tuple[list[str], list[int]]:
    """Headers and inner widths, read from the rendered top rule and header line."""
    lines = text.splitlines()
    top = next(line for line in lines if line.startswith(("┏", "━", "┳")) or "┳" in line)
    header = lines[lines.index(top) + 1]
    widths = [len(part) - 2 for part in top.strip("┏┓").split("┳")]
    names = [part.strip() for part in header.strip("┃").split("┃")]
    return names, widths


def test_status_at_80_columns_has_no_column_narrower_than_its_first_header_word() -> None:
    data = synthetic_board(24).to_json()
    data["briefs"][0]["status_note"] = "stuck: desk coder silent for 6s; released for resume"
    for width in (60, 80, 100):
        table = _status_table(data, width=width)
        text = _render(table, width)
        names, widths = _column_widths(text)
        assert len(names) >= 4 and {"brief", "state"} <= set(names)
        for name, inner in zip(names, widths, strict=True):
            assert inner >= len(name.split()[0]), (width, name, inner)
        assert max(len(line) for line in text.splitlines()) <= width
    assert len(_column_widths(_render(_status_table(data, width=300), 300))[0]) == 15
    first = data["briefs"][0]
    notes = _notes(_status_table(data, width=80), data)  # the note column left out: listed
    assert f"{first['id']}: {first['status_note']}" in notes
    assert notes == [f"{r['id']}: {r['status_note']}" for r in data["briefs"] if r["status_note"]]
    assert _notes(_status_table(data, width=300), data) == []


def test_cells_are_plain_text_never_markup() -> None:
    table = fitted_table(("brief", "note"), [("[bold]x[/bold]", "[link=http://e]y[/link]")])
    text = _render(table, 80)
    assert "[bold]x[/bold]" in text and "[link=http://e]y[/link]" in text
