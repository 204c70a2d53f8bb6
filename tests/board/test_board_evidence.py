"""The board's evidence column follows the evidence package's merge rule, on a real forge.

A row shows as verified only when a record that counts (written by the gate, not by the
claim's desk; signed when a gate key is set) passed at the review's current head for the
row's current command; a record at an older head or for an older command is stale.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from assay.claims import ClaimStore
from assay.evidence.records import EvidenceRecord, encode, seal
from assay.evidence.store import append_records
from assay.forge import Forge, open_forge
from assay.forgestate.briefs import EvidenceCounts
from assay.forgestate.rows import collect_board
from assay.plumbing import ASSAY_IDENTITY, RefUpdate
from tests.forge_fixtures import put_on_main
from tests.gatekeys import key_for

BRIEF = """---
id: calc
title: Add calc.add
desk: coder
verify:
  - id: unit
    run: python3 check.py
  - id: lint
    run: test -f calc.py
  - id: docs
    run: test -f README.md
  - id: types
    run: python3 -m mypy calc.py --strict
---
Add a function add(a, b) to calc.py.
"""


def _record(row: str, command: str, head: str, *, verifier: str = "gate:ci") -> EvidenceRecord:
    return EvidenceRecord(
        brief="calc",
        row=row,
        command=command,
        exit=0,
        timed_out=False,
        seconds=0.2,
        output_sha256="sha256:" + "0" * 64,
        output_bytes=3,
        output_tail="ok\n",
        head_sha=head,
        env_fingerprint={"python": "3.11.2"},
        verifier=verifier,
        journal_head="",
        at="2026-03-01T12:00:00Z",
    )


def _scene(forge_path: Path) -> tuple[Forge, str, str]:
    """Brief calc on main, a claim by desk ``coder``, and a branch one commit past main."""
    main = put_on_main(forge_path, {"briefs/calc.md": BRIEF})
    forge = open_forge(str(forge_path))
    head = forge.commit(
        {"calc.py": b"def add(a, b):\n    return a + b\n"},
        parents=[main],
        message="add calc",
        author=ASSAY_IDENTITY,
    )
    assert forge.push([RefUpdate("refs/heads/assay/calc", head, expected=None)]).ok
    ClaimStore(forge).acquire("calc", "coder", lease_s=600, holder="host-1")
    return forge, main, head


def _counts(forge: Forge) -> EvidenceCounts:
    state, _ = collect_board(forge)
    (row,) = [r for r in state.rows if r.id == "calc"]
    return row.evidence


GATE = key_for("gate")


def test_desk_written_and_stale_records_never_show_as_verified(
    forge_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASSAY_EVIDENCE_KEY", GATE.text)
    forge, old, head = _scene(forge_path)
    with forge:
        append_records(
            forge,
            "calc",
            [
                _record("unit", "python3 check.py", head),  # counts: verified
                _record("lint", "test -f calc.py", head, verifier="gate:coder"),  # the desk's
                _record("lint", "test -f calc.py", head, verifier="coder"),  # not a gate
                _record("docs", "test -f README.md", old),  # an older head: stale
                _record("types", "python3 -m mypy calc.py", head),  # an older command: stale
            ],
            key=GATE,
        )
        counts = _counts(forge)
    assert (counts.rows, counts.verified, counts.stale, counts.failing) == (4, 1, 2, 0)
    assert counts.label == "1/4 stale 2"


def test_unsigned_records_never_count_and_show_as_unsigned(
    forge_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ASSAY_EVIDENCE_KEY", raising=False)
    forge, _, head = _scene(forge_path)
    with forge:
        append_records(forge, "calc", [_record("unit", "python3 check.py", head)])
        counts = _counts(forge)
        assert (counts.verified, counts.unsigned) == (0, 1)  # the insecure choice, visible
        assert counts.label == "0/4 unsigned 1"
        monkeypatch.setenv("ASSAY_EVIDENCE_KEY", GATE.text)
        assert _counts(forge).verified == 0  # unsigned: the merge rule would not count it
        append_records(forge, "calc", [_record("unit", "python3 check.py", head)], key=GATE)
        assert (_counts(forge).verified, _counts(forge).unsigned) == (1, 0)


def test_without_a_branch_the_review_record_names_the_head(
    forge_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASSAY_EVIDENCE_KEY", GATE.text)
    forge, _, head = _scene(forge_path)
    with forge:
        append_records(forge, "calc", [_record("unit", "python3 check.py", head)], key=GATE)
        review = forge.commit(
            {
                # A complete review record: the read model decodes it with the gate's
                # strict decoder (a partial one makes the brief invalid).
                "review.json": json.dumps(
                    {
                        "v": 1,
                        "brief": "calc",
                        "branch": "assay/calc",
                        "head_sha": head,
                        "title": "calc",
                        "body": "",
                        "state": "merged",
                        "updated_at": "2026-01-01T00:00:00Z",
                    }
                ).encode()
            },
            parents=[],
            message="review",
            author=ASSAY_IDENTITY,
        )
        assert forge.push(
            [
                RefUpdate("refs/assay/reviews/calc", review, expected=None),
                RefUpdate("refs/heads/assay/calc", None, expected=head),
            ]
        ).ok
        assert _counts(forge).verified == 1


def test_the_board_reads_the_evidence_log_as_the_gate_does(forge_path: Path) -> None:
    # One walker for the evidence log: a log the gate refuses (a signed record of another
    # brief chained in, or a history that is not linear) the board shows as invalid, never
    # as evidence.
    forge, main, head = _scene(forge_path)
    key = key_for("the gate")
    ref = "refs/assay/evidence/calc"
    good = append_records(forge, "calc", [_record("unit", "python3 check.py", head)], key=key)
    other = dataclasses.replace(_record("lint", "test -f calc.py", head), brief="other")
    misnamed = forge.commit(
        {"record.json": encode(seal(other, prev=good.last_digest, key=key))},
        parents=[good.tip] if good.tip else [],
        message="a record of another brief",
        author=ASSAY_IDENTITY,
    )
    merged = forge.commit(
        {"record.json": b"{}"}, parents=[good.tip or "", main], message="m", author=ASSAY_IDENTITY
    )
    for bad, why in ((misnamed, "names brief 'other'"), (merged, "not a single-parent child")):
        current = forge.refresh([ref]).get(ref)
        assert forge.push([RefUpdate(ref, bad, expected=current)]).ok
        state, _ = collect_board(forge)
        (row,) = [r for r in state.rows if r.id == "calc"]
        assert row.state == "invalid", why
        assert why in row.status_note, row.status_note
