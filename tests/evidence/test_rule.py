"""The merge rule as a pure function: every verdict, and what never counts."""

from __future__ import annotations

from assay.evidence.claimed import Claimed, ClaimedRow, claimed_from_entries, journal_anchors
from assay.evidence.records import EvidenceRecord
from assay.evidence.rule import Verdict, decide
from assay.evidence.spec import EnvDecl, RowSpec
from tests.evidence.gatekit import record

HEAD = "b" * 40
OLD = "a" * 40
FP = {"python": "3.11.2", "lock:req.lock": "sha256:11"}
ENV = EnvDecl(python="3.11", locks=("req.lock",))
ROWS = [RowSpec("unit", "pytest -q"), RowSpec("lint", "ruff check")]
CLAIM = Claimed(rows={"unit": ClaimedRow("unit", "pass")}, env_fingerprint=FP)


def _rec(
    row: str, command: str, *, exit: int = 0, head: str = HEAD, **kw: object
) -> EvidenceRecord:
    given = {"row": row, "command": command, "exit": exit, "head_sha": head, "env_fingerprint": FP}
    return record(**{**given, **kw})


def _decide(
    records: list[EvidenceRecord],
    *,
    claimed: Claimed = CLAIM,
    desk_names: frozenset[str] = frozenset(),
    require_signed: bool = False,
) -> dict[str, Verdict]:
    decision = decide(
        brief="calc",
        rows=ROWS,
        records=records,
        head_sha=HEAD,
        env=ENV,
        claimed=claimed,
        desk_names=desk_names,
        require_signed=require_signed,
    )
    return {s.row: s.verdict for s in decision.rows}


def test_every_row_passing_at_head_allows_the_merge() -> None:
    records = [_rec("unit", "pytest -q"), _rec("lint", "ruff check")]
    decision = decide(
        brief="calc", rows=ROWS, records=records, head_sha=HEAD, env=ENV, claimed=CLAIM
    )
    assert decision.allowed
    assert decision.blocking() == []


def test_missing_failing_and_stale_rows_are_named() -> None:
    records = [_rec("unit", "pytest -q", exit=1), _rec("lint", "ruff check", head=OLD)]
    assert _decide(records) == {"unit": Verdict.FAILING, "lint": Verdict.STALE}
    assert _decide([_rec("unit", "pytest -q")]) == {"unit": Verdict.PASS, "lint": Verdict.MISSING}
    decision = decide(
        brief="calc", rows=ROWS, records=records, head_sha=HEAD, env=ENV, claimed=CLAIM
    )
    blocking = decision.blocking()
    assert "row 'unit': failing: fail (exit 1)" in blocking
    assert any("row 'lint': stale: verified at aaaaaaaaaaaa" in line for line in blocking)


def test_the_latest_record_at_head_wins() -> None:
    records = [
        _rec("unit", "pytest -q", exit=1),
        _rec("unit", "pytest -q"),
        _rec("lint", "ruff check"),
    ]
    assert _decide(records)["unit"] is Verdict.PASS
    records.append(_rec("unit", "pytest -q", exit=2))
    assert _decide(records)["unit"] is Verdict.FAILING


def test_a_changed_command_makes_evidence_stale() -> None:
    assert _decide([_rec("unit", "pytest -q -k easy")])["unit"] is Verdict.STALE


def test_a_row_the_desk_wrote_never_counts() -> None:
    forged = [
        _rec("unit", "pytest -q", verifier="desk:coder"),
        _rec("lint", "ruff check", verifier="gate:coder"),
    ]
    assert _decide(forged, desk_names=frozenset({"coder"})) == {
        "unit": Verdict.MISSING,
        "lint": Verdict.MISSING,
    }


def test_unsigned_records_do_not_count_when_signatures_are_required() -> None:
    records = [_rec("unit", "pytest -q"), _rec("lint", "ruff check", signed=True)]
    assert _decide(records, require_signed=True) == {"unit": Verdict.MISSING, "lint": Verdict.PASS}


def test_a_different_environment_is_a_mismatch_with_its_diff() -> None:
    other = {**FP, "lock:req.lock": "sha256:22"}
    records = [_rec("unit", "pytest -q", env_fingerprint=other), _rec("lint", "ruff check")]
    decision = decide(
        brief="calc", rows=ROWS, records=records, head_sha=HEAD, env=ENV, claimed=CLAIM
    )
    unit = decision.rows[0]
    assert unit.verdict is Verdict.ENV_MISMATCH
    assert "lock:req.lock: desk sha256:11 != gate sha256:22" in unit.reason
    wrong_python = [_rec("unit", "pytest -q", env_fingerprint={**FP, "python": "3.12.1"})]
    assert (
        _decide(wrong_python, claimed=Claimed(env_fingerprint={**FP, "python": "3.12.1"}))["unit"]
        is Verdict.ENV_MISMATCH
    )


def test_no_rows_or_no_desk_fingerprint_refuses() -> None:
    empty = decide(brief="calc", rows=[], records=[], head_sha=HEAD, env=EnvDecl())
    assert not empty.allowed
    records = [_rec("unit", "pytest -q"), _rec("lint", "ruff check")]
    no_fp = decide(
        brief="calc", rows=ROWS, records=records, head_sha=HEAD, env=ENV, claimed=Claimed()
    )
    assert not no_fp.allowed
    assert "no environment fingerprint" in no_fp.blocking()[0]
    undeclared = decide(brief="calc", rows=ROWS, records=records, head_sha=HEAD, env=EnvDecl())
    assert undeclared.allowed


def test_claims_are_read_from_the_latest_claim_step() -> None:
    entries = [
        {"seq": 0, "kind": "start", "prev": ""},
        {
            "seq": 1,
            "kind": "step",
            "step": "compute",
            "name": "evidence.claimed",
            "status": "ok",
            "out": {"value": {"rows": [{"row": "unit", "result": "fail"}]}},
            "prev": "sha256:l0",
        },
        {
            "seq": 2,
            "kind": "step",
            "step": "compute",
            "name": "evidence.claimed",
            "status": "ok",
            "out": {"blob": "sha256:b"},
            "prev": "sha256:l1",
        },
        {
            "seq": 3,
            "kind": "step",
            "step": "compute",
            "name": "other",
            "out": {"value": 1},
            "prev": "sha256:l2",
        },
    ]
    blobs = {
        "sha256:b": {
            "rows": [{"row": "unit", "result": "pass", "note": "ok"}],
            "env_fingerprint": FP,
        }
    }
    claim = claimed_from_entries(entries, load_blob=blobs.__getitem__)
    assert claim.rows["unit"].result == "pass"
    assert claim.env_fingerprint == FP
    assert claim.seq == 2
    assert claimed_from_entries(entries[:1]) == Claimed()
    assert journal_anchors(entries, "sha256:l3") == {
        "sha256:l0",
        "sha256:l1",
        "sha256:l2",
        "sha256:l3",
    }
