"""The HTML board in a real headless Chromium: its table and charts render, with no errors."""

from __future__ import annotations

from pathlib import Path

from assay.board.render import render_html
from tests.board.chromium import Browser
from tests.board.states import synthetic_board

_MEASURE = """JSON.stringify({
  rows: document.querySelectorAll('#briefs tr.brief').length,
  tableHeight: document.getElementById('briefs').getBoundingClientRect().height,
  bars: Array.from(document.querySelectorAll('#state-chart rect.bar'))
    .map(r => r.getBoundingClientRect().width),
  held: document.querySelectorAll('#timeline rect.held').length,
  timelineWidth: document.getElementById('timeline').getBoundingClientRect().width,
  resources: performance.getEntriesByType('resource').length
})"""


def test_html_board_renders_table_and_charts_without_console_errors(tmp_path: Path) -> None:
    import json

    page = tmp_path / "board.html"
    page.write_text(render_html(synthetic_board(120)), encoding="utf-8")
    # A control page proves that a console error would be seen and fail this test.
    control = tmp_path / "control.html"
    control.write_text("<!DOCTYPE html><title>c</title><script>console.error('boom')</script>")
    with Browser(tmp_path / "profile") as browser:
        browser.open(control.as_uri())
        browser.settle()
        assert any("boom" in error for error in browser.errors)
        browser.errors.clear()

        browser.open(page.as_uri())
        measured = json.loads(browser.evaluate(_MEASURE))
        shot = browser.screenshot(tmp_path / "board.png")
        browser.settle()
        assert browser.errors == []
    assert measured["rows"] == 120
    assert measured["tableHeight"] > 120 * 10
    assert len(measured["bars"]) == 8 and all(width > 50 for width in measured["bars"])
    assert measured["held"] >= 40  # 40 runs on the timeline, each with held sessions
    assert measured["timelineWidth"] > 500
    assert measured["resources"] == 0  # nothing fetched: the page is self-contained
    assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert shot.stat().st_size > 10_000
