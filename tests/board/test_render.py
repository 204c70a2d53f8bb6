"""The board's renderers: deterministic bytes, escaping, grouping, totals, templates."""

from __future__ import annotations

import dataclasses
import random
import re
from datetime import timedelta
from pathlib import Path

import pytest

from assay.board.render import render_html, render_markdown
from assay.errors import BadInput
from assay.forgestate.rows import BoardState, BriefRow, Session
from assay.forgestate.times import duration
from tests.board.states import BASE, synthetic_board


def test_rendering_twice_gives_the_same_bytes_whatever_the_row_order() -> None:
    state = synthetic_board(60)
    shuffled_rows = list(state.rows)
    random.Random(7).shuffle(shuffled_rows)
    shuffled = dataclasses.replace(state, rows=tuple(shuffled_rows))
    assert render_markdown(state) == render_markdown(state) == render_markdown(shuffled)
    assert render_html(state) == render_html(state) == render_html(shuffled)


def test_a_board_of_1000_briefs_lists_every_brief_once_grouped_by_state() -> None:
    state = synthetic_board(1000)
    markdown = render_markdown(state)
    html = render_html(state)
    for index in range(1000):
        brief = f"brief-{index:04d}"
        assert markdown.count(f"| {brief} |") == 1
        assert html.count(f"<td>{brief}</td>") == 1
    assert "| 1,000 |" in markdown  # the briefs total
    headings = re.findall(r"^## (.+) \((\d+)\)$", markdown, flags=re.MULTILINE)
    assert [title for title, _ in headings][:2] == [
        "Stuck (released for resume)",
        "Lease expired (not yet swept)",
    ]
    assert sum(int(count) for _, count in headings) == 1000
    assert html.count('<tr class="brief"') == 1000


def test_markdown_cells_cannot_break_the_table() -> None:
    state = synthetic_board(3)
    markdown = render_markdown(state)
    row = next(line for line in markdown.splitlines() if line.startswith("| brief-0001 |"))
    unescaped_pipes = len(re.findall(r"(?<!\\)\|", row))
    assert unescaped_pipes == 17  # 16 columns
    assert "<and markup>" not in markdown
    assert "\\| with a pipe &lt;and markup&gt;" in markdown


def test_html_is_self_contained_and_escaped() -> None:
    html = render_html(synthetic_board(20))
    assert "<script" not in html
    assert "<link" not in html
    assert not re.search(r"\bsrc=", html)
    external = [
        u for u in re.findall(r"https?://[^\"' <]+", html) if "www.w3.org/2000/svg" not in u
    ]
    assert external == []
    assert "&lt;and markup&gt;" in html
    assert html.count('<svg xmlns="http://www.w3.org/2000/svg"') == 2


def test_the_board_shows_held_seconds_beside_wall_clock_age() -> None:
    row = BriefRow(
        id="b1",
        state="waiting",
        run_started=BASE,
        run_last=BASE + timedelta(seconds=90),
        sessions=(
            Session(BASE, BASE + timedelta(seconds=30)),
            Session(BASE + timedelta(hours=1), BASE + timedelta(hours=1, seconds=30)),
        ),
    )
    state = BoardState(forge="f", main="", as_of=BASE + timedelta(hours=2), rows=(row,))
    markdown = render_markdown(state)
    line = next(line for line in markdown.splitlines() if line.startswith("| b1 |"))
    assert "| 2h00m | 1m00s |" in line
    assert "99.2%" in markdown  # idle share: 1 - 60 s held / 7200 s of age


def test_templates_dir_overrides_the_shipped_templates(tmp_path: Path) -> None:
    (tmp_path / "board.md.j2").write_text("{{ totals.briefs }} briefs as of {{ as_of }}\n")
    out = render_markdown(synthetic_board(4), templates=tmp_path)
    assert out == "4 briefs as of 2026-03-02T12:00:00Z\n"
    with pytest.raises(BadInput, match="--templates"):
        render_html(synthetic_board(4), templates=tmp_path / "missing")


def test_a_broken_template_is_bad_input_naming_it(tmp_path: Path) -> None:
    (tmp_path / "board.md.j2").write_text("{{ no_such_variable }}\n")
    with pytest.raises(BadInput, match=r"board\.md\.j2") as caught:
        render_markdown(synthetic_board(1), templates=tmp_path)
    assert caught.value.code == 65


def test_empty_board_renders() -> None:
    state = BoardState(forge="f", main="", as_of=BASE, rows=())
    assert "No briefs on main" in render_markdown(state)
    assert "no runs yet" in render_html(state)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (0, "0s"), (59.4, "59s"), (61, "1m01s"), (3600, "1h00m"), (200000, "2d07h")],
)
def test_durations(seconds: float | None, text: str) -> None:
    assert duration(seconds) == text
