"""A brief title holding terminal escapes reaches no terminal, BOARD.md or page raw.

The title clears the screen (ESC [ 2 J), rings the bell (BEL), returns the carriage (CR)
and reverses what follows it (U+202E); its body retitles the terminal window. ``brief
list``, ``brief show``, ``status`` and ``board`` (Markdown and HTML) show each as its
escape instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import AssayRunner
from tests.forge_fixtures import put_on_main

EVIL = (
    "---\nid: evil\n"
    'title: "Clear\\e[2J bell\\a cr\\r rtl\\u202eevil"\n'
    "---\nDo it.\x1b]0;retitled\x07\n"
)
RAW = ("\x1b", "\x07", "\r", "\u202e")
SHOWN = ("Clear\\x1b[2J", "bell\\x07", "rtl\\u202eevil")


def _assert_escaped(text: str) -> None:
    for char in RAW:
        assert char not in text, repr(text)


@pytest.mark.slow
def test_brief_list_and_show_escape_the_title(run_assay: AssayRunner, forge_path: Path) -> None:
    put_on_main(forge_path, {"briefs/evil.md": EVIL})
    listed = run_assay("brief", "list", "--forge", str(forge_path), env={"COLUMNS": "400"})
    assert listed.returncode == 0, listed.stderr
    _assert_escaped(listed.stdout + listed.stderr)
    for shown in SHOWN:
        assert shown in listed.stdout
    assert "cr\\x0d" in listed.stdout
    shown_brief = run_assay("brief", "show", "evil", "--forge", str(forge_path))
    assert shown_brief.returncode == 0, shown_brief.stderr
    _assert_escaped(shown_brief.stdout)
    assert "Do it.\\x1b]0;retitled\\x07\n" in shown_brief.stdout
    # --json keeps the title exactly as written: JSON escapes it itself.
    data = run_assay("brief", "list", "--forge", str(forge_path), "--json")
    (row,) = json.loads(data.stdout)["briefs"]
    assert row["title"] == "Clear\x1b[2J bell\x07 cr\r rtl\u202eevil"


def test_status_and_the_board_escape_the_title(
    run_assay: AssayRunner, forge_path: Path, tmp_path: Path
) -> None:
    put_on_main(forge_path, {"briefs/evil.md": EVIL})
    status = run_assay("status", "--forge", str(forge_path), env={"COLUMNS": "400"})
    assert status.returncode == 0, status.stderr
    _assert_escaped(status.stdout)
    board_md, board_html = tmp_path / "BOARD.md", tmp_path / "board.html"
    done = run_assay(
        "board", "--forge", str(forge_path), "--out", str(board_md), "--html", str(board_html)
    )
    assert done.returncode == 0, done.stderr
    markdown = board_md.read_text(encoding="utf-8")
    html = board_html.read_text(encoding="utf-8")
    _assert_escaped(markdown)
    _assert_escaped(html)
    assert "| Clear\\x1b[2J bell\\x07 cr rtl\\u202eevil |" in markdown
    assert "<td>Clear\\x1b[2J bell\\x07 cr\\x0d rtl\\u202eevil</td>" in html


def test_verify_shows_a_failing_row_s_escapes_instead_of_sending_them(
    run_assay: AssayRunner, tmp_path: Path
) -> None:
    from tests.evidence.gatekit import BRIEF, Scene

    scene = Scene(tmp_path)
    hostile = 'print("\\x1b[2J\\x07\\u202eboom")\n\ndef add(a, b):\n    return a - b\n'
    head = scene.desk_commit({"calc.py": hostile}, claims={"unit": "pass", "lint": "pass"})
    scene.open_review(head)
    env = {"ASSAY_STATE": str(tmp_path / "state"), "ASSAY_VERIFIER": "ci", "COLUMNS": "400"}
    done = run_assay("verify", BRIEF, "--forge", str(scene.forge), env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    _assert_escaped(done.stdout + done.stderr)
    assert "\\x1b[2J\\x07\\u202eboom" in done.stdout
