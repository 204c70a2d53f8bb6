"""The board's run pages: ``assay board`` writes ``runs/<brief>.html`` beside its page and
links each brief there; a page tells the whole run (the model's answers, the tools' output,
what each step cost, the kill and the resume, the wait, the evidence), shows every text from
a model, tool or brief as text, and fits a 1280- and an 800-pixel window in Chromium."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import pytest

from assay.board.render import render_run_pages
from assay.board.runs import RunPage, build_run_pages
from assay.forge import open_forge
from assay.forgestate.rows import collect_snapshot
from tests.board.chromium import Browser
from tests.board.runs_forge import SCRIPT, build_watched_forge
from tests.conftest import assay_argv, assay_env
from tests.forge_fixtures import init_forge


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder ``assay board`` wrote for the watched forge (one run of the command)."""
    root = tmp_path_factory.mktemp("runs")
    forge = init_forge(root / "forge.git")
    build_watched_forge(forge)
    done = subprocess.run(
        assay_argv("board", "--forge", str(forge), "--out", "out/BOARD.md", "--json"),
        cwd=root,
        env=assay_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["runs"] == 1 and report["html"] == "out/board.html"
    return root / "out"


def _pages(forge_path: Path) -> tuple[list[RunPage], dict[str, str]]:
    with open_forge(str(forge_path)) as forge, tempfile.TemporaryDirectory() as scratch:
        snapshot, state = collect_snapshot(forge)
        pages = build_run_pages(forge, snapshot, state, Path(scratch))
    return pages, render_run_pages(pages, state, board_href="board.html")


def test_the_board_links_each_run_to_a_page_that_tells_the_whole_run(written: Path) -> None:
    board = (written / "board.html").read_text(encoding="utf-8")
    assert sorted(p.name for p in (written / "runs").iterdir()) == ["watch.html"]
    assert '<a href="runs/watch.html">watch</a>' in board
    assert "<td>quiet</td>" in board  # queued, no branch: no page, no link
    page = (written / "runs" / "watch.html").read_text(encoding="utf-8")
    assert '<a href="../board.html">' in page
    # Nothing a model, a tool or a brief wrote is markup on the page.
    assert "<script" not in page and "<img" not in page
    assert "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt; I will write" in page
    assert "onerror=" in page and "&lt;img src=x onerror=" in page
    kinds = [
        line.split('data-kind="', 1)[1].split('"', 1)[0]
        for line in page.splitlines()
        if 'data-kind="' in line
    ]
    assert kinds.count("said") == 2 and kinds.count("asks") == 1
    assert kinds.count("output") == 1 and kinds.count("agent") == 1
    assert kinds.count("stopped") == 1 and kinds.count("repeated") == 1
    assert kinds.count("wait") == 1 and kinds.count("wake") == 1 and kinds.count("evidence") == 2
    assert "in flight: model at 3" in page
    assert '<tr class="entry resumed" data-kind="takeover">' in page  # fence 1 -> 2
    assert "fence 1 -&gt; 2; 1 model call(s) paid again" in page
    assert "for approval: approve by ann" in page
    # What each call cost, and the run's counts: the request in flight was paid twice.
    assert page.count("1,500 tok $0.0042") == 2
    assert "2 model call(s) answered, 3 request(s) sent upstream (1 repeated" in page
    assert '<span class="v">2 +1 repeated</span>' in page
    # The evidence: the gate's record (not at the tip) and the desk's claim of each row.
    assert "<td>unit</td><td>pass</td><td>gate</td>" in page and "(not the tip)" in page
    assert "<td>lint</td><td>not run</td><td>gate</td>" in page
    assert page.count("desk&#39;s claim") == 2
    # A shortened answer is there in full, unfolded, with its line breaks.
    assert "Then I read it back. " * 12 in page
    assert "Bash cat a.txt\n-&gt; &lt;script&gt;" in page


_FITS = """(() => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  const width = document.documentElement.clientWidth;
  const over = [];
  for (const el of document.body.querySelectorAll('*')) {
    if (el.closest('svg') && el.tagName.toLowerCase() !== 'svg') continue;
    const box = el.getBoundingClientRect();
    if (box.width === 0 && box.height === 0) continue;
    const name = el.tagName.toLowerCase() + (el.id ? '#' + el.id : '');
    if (box.right > width + 0.5 || box.left < -0.5) over.push(name + ' ends at ' + box.right);
    else if (el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1)
      over.push(name + ' holds ' + el.scrollWidth + ' in ' + el.clientWidth);
  }
  const said = document.querySelector('tr.said td.what');
  return JSON.stringify({
    width, page: document.documentElement.scrollWidth, over: over.slice(0, 5),
    scripts: document.scripts.length, images: document.images.length,
    title: document.title, said: said ? said.textContent : null,
    table: document.querySelector('table').getBoundingClientRect().right,
  });
})()"""


def _measure(browser: Browser, url: str, width: int) -> dict[str, object]:
    browser.call(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
    )
    browser.open(url)
    found: dict[str, object] = json.loads(browser.evaluate(_FITS))
    return found


def test_run_page_and_board_fit_the_window_and_show_markup_as_text(
    written: Path, tmp_path: Path
) -> None:
    run_page = (written / "runs" / "watch.html").as_uri()
    board = (written / "board.html").as_uri()
    with Browser(tmp_path / "profile") as browser:
        at = {width: _measure(browser, run_page, width) for width in (1280, 800)}
        board_at = _measure(browser, board, 1280)
        narrow_board = _measure(browser, board, 800)
        hidden = browser.evaluate(
            "Array.from(document.querySelectorAll('#briefs thead th'))"
            ".filter(th => th.getBoundingClientRect().width === 0).map(th => th.textContent)"
        )
        # The check sees what it looks for: a page wider than the window fails it.
        browser.evaluate(
            "document.body.insertAdjacentHTML('beforeend', '<div style=\"width:3000px\">w</div>')"
        )
        control = json.loads(browser.evaluate(_FITS))
        browser.settle()
        assert browser.errors == []
    assert control["over"] and control["page"] > 1280
    for width, found in at.items():
        assert found["width"] <= width and found["page"] == found["width"], (width, found)
        assert found["over"] == [], (width, found["over"])
        assert found["scripts"] == 0 and found["images"] == 0
        assert str(found["title"]).startswith("Run of watch")  # no script of the model's ran
        assert str(found["said"]).startswith(f"{SCRIPT} I will write the file first.")
    assert board_at["over"] == [] and board_at["page"] == board_at["width"], board_at
    assert float(str(board_at["table"])) <= float(str(board_at["width"]))
    # At 800 pixels the board leaves out what `assay status` leaves out first, and fits.
    assert narrow_board["page"] == narrow_board["width"], narrow_board
    assert hidden == ["lease age", "at", "tokens", "run age", "held"]


def test_a_run_page_is_the_same_bytes_each_time(written: Path) -> None:
    forge = written.parent / "forge.git"
    first, second = _pages(forge), _pages(forge)
    assert list(first[1]) == ["runs/watch.html"] and first[1] == second[1]


def test_a_journal_that_fails_its_check_gets_a_page_saying_why(forge_path: Path) -> None:
    from assay.plumbing import ASSAY_IDENTITY, RefUpdate

    build_watched_forge(forge_path)
    ref, path = "refs/heads/assay/watch", ".assay/journal/watch/000001.jsonl"
    with open_forge(str(forge_path)) as forge:
        tip = forge.fetch(ref)[ref]
        original = forge.read_blob(tip, path)
        assert original is not None and b"asking for approval" in original
        edited = original.replace(b"asking for approval", b"asking for APPROVAL")
        commit = forge.commit({path: edited}, parents=[tip], message="edit", author=ASSAY_IDENTITY)
        assert forge.push([RefUpdate(ref, commit, expected=tip)]).ok
    [page], html = _pages(forge_path)
    assert "checksum mismatch" in page.problem and page.lines == ()
    shown = html["runs/watch.html"]
    assert "The journal could not be read:" in shown and "checksum mismatch" in shown
    assert "no journal entries" in shown and "APPROVAL" not in shown
