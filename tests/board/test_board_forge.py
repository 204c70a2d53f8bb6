"""The board from a real forge: 1,000 briefs in every state, deterministic bytes."""

from __future__ import annotations

import json
import re
from pathlib import Path

from assay.board.render import render_html, render_markdown
from assay.forge import open_forge
from assay.forgestate.rows import collect_board
from tests.board.bulk import build_bulk_forge
from tests.conftest import AssayRunner


def test_a_board_of_1000_briefs_renders_the_same_bytes_twice(
    forge_path: Path, tmp_path: Path, run_assay: AssayRunner
) -> None:
    build_bulk_forge(forge_path, 1000)
    outputs = []
    for attempt in range(2):
        md, html = tmp_path / f"BOARD{attempt}.md", tmp_path / f"board{attempt}.html"
        done = run_assay(
            "board", "--out", str(md), "--html", str(html), "--forge", str(forge_path), "--json"
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["briefs"] == 1000
        outputs.append((md.read_bytes(), html.read_bytes()))
    assert outputs[0] == outputs[1]
    markdown = outputs[0][0].decode()
    groups = dict(re.findall(r"^## (.+) \((\d+)\)$", markdown, flags=re.MULTILINE))
    assert {title: int(n) for title, n in groups.items()} == {
        "Stuck (released for resume)": 143,
        "Lease expired (not yet swept)": 143,
        "Waiting (no process held)": 143,
        "Working (claim live)": 143,
        "Released (resumable)": 143,
        "Queued (no claim yet)": 142,
        "Closed": 143,  # a done claim without a review; "done" is no brief state
    }
    assert markdown.count("| bulk-") == 1000
    done_row = next(x for x in markdown.splitlines() if x.startswith("| bulk-0004 |"))
    assert "| 0/2 stale 1 |" in done_row  # evidence recorded at another head: stale
    assert "| 1,500 | $0.0042 |" in done_row  # tokens and cost from the journal


def test_now_changes_only_what_depends_on_it(forge_path: Path) -> None:
    from datetime import timedelta

    now = build_bulk_forge(forge_path, 14)
    with open_forge(str(forge_path)) as forge:
        at_now, _ = collect_board(forge, now=now)
        later, _ = collect_board(forge, now=now + timedelta(hours=1))
        from_forge, _ = collect_board(forge)
    assert render_markdown(at_now) != render_markdown(later)  # ages moved on
    assert at_now.as_of_source == "now" and from_forge.as_of_source == "forge"
    assert "(the latest instant the forge records)" in render_markdown(from_forge)
    # An hour on, the live claims' leases have run out: the board says so.
    assert [r.state for r in later.rows] == [
        "expired" if r.state == "held" else r.state for r in at_now.rows
    ]
    assert "<svg" in render_html(at_now)


def test_an_edited_journal_line_is_shown_as_corrupt(forge_path: Path) -> None:
    from assay.plumbing import ASSAY_IDENTITY, RefUpdate

    build_bulk_forge(forge_path, 2)
    ref = "refs/heads/assay/bulk-0000"
    path = ".assay/journal/bulk-0000/000001.jsonl"
    with open_forge(str(forge_path)) as forge:
        tip = forge.fetch(ref)[ref]
        original = forge.read_blob(tip, path)
        assert original is not None and b'"text":"plan"' in original
        edited = original.replace(b'"text":"plan"', b'"text":"PLAN"')
        commit = forge.commit(
            {path: edited}, parents=[tip], message="edit history", author=ASSAY_IDENTITY
        )
        assert forge.push([RefUpdate(ref, commit, expected=tip)]).ok
        state, _ = collect_board(forge)
    row = next(r for r in state.rows if r.id == "bulk-0000")
    assert row.status_note == "journal: corrupt: 000001.jsonl line 3: checksum mismatch"
    assert row.steps == 0  # nothing past the bad line is believed
    assert "corrupt" in render_markdown(state)


def test_bad_flags_are_bad_input_naming_them(forge_path: Path, run_assay: AssayRunner) -> None:
    done = run_assay("board", "--now", "yesterday", "--forge", str(forge_path))
    assert done.returncode == 65 and "--now" in done.stderr
    done = run_assay("board", "--templates", "nowhere", "--forge", str(forge_path), "--json")
    assert done.returncode == 65 and json.loads(done.stdout)["status"] == "bad_input"
    done = run_assay("sweep", "--sweepers", "nowhere", "--forge", str(forge_path))
    assert done.returncode == 65 and "--sweepers" in done.stderr
