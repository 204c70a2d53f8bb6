"""A record that fails its owner's decoder makes only its own brief ``invalid``."""

from __future__ import annotations

import json
from pathlib import Path

from assay.claims import ClaimStore
from assay.desks.records.events import EventLog
from assay.desks.records.state import read_view
from assay.forge import open_forge
from assay.forgestate.rows import collect_board
from assay.plumbing import ASSAY_IDENTITY, RefUpdate
from tests.forge_fixtures import put_on_main


def _brief(brief: str) -> str:
    return f"---\nid: {brief}\ntitle: {brief}\n---\nDo it.\n"


def test_a_malformed_event_is_skipped_with_a_note_for_its_brief_alone(forge_path: Path) -> None:
    # docs/sweepers.md, docs/desk-loop.md: an event record that fails its decoder is never
    # delivered; it is named on its brief's row, and neither that brief nor any other wedges
    # (anyone who may push an event could otherwise stop a brief).
    put_on_main(forge_path, {f"briefs/{b}.md": _brief(b) for b in ("good", "bad")})
    with open_forge(str(forge_path)) as forge:
        ClaimStore(forge).acquire("good", "coder", lease_s=3600, holder="h1")
        EventLog(forge, "good").append("approve")
        record = {"v": 1, "kind": "events", "id": "e1", "event": "teleport", "text": ""}
        record |= {"actor": "", "at": "2026-01-01T00:00:00Z", "data": {}}
        bad = forge.commit(
            {"record.json": json.dumps(record).encode()},
            parents=[],
            message="a hand-made event",
            author=ASSAY_IDENTITY,
        )
        assert forge.push([RefUpdate("refs/assay/events/bad", bad, expected=None)]).ok
        board, _ = collect_board(forge)
        rows = {row.id: row for row in board.rows}
        assert rows["bad"].state == "queued"
        assert "skipped" in rows["bad"].status_note
        assert "field 'event' is 'teleport'" in rows["bad"].status_note
        assert rows["good"].state == "held" and rows["good"].status_note == ""
        view = read_view(forge)
        assert "bad" in view.briefs and "good" in view.briefs
        assert view.events("bad") == []  # never delivered
        assert any("teleport" in note for note in view.event_notes["bad"])
