"""A long-running process decodes each record once (``assay.forgestate.source``), and that never
lets a record through that a fresh read would refuse: a moved ref is read again, a refused
record stays refused, and a signature left unchecked is checked once there is a key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay.claims import ClaimStore
from assay.desks.records.state import read_view
from assay.evidence.store import append_records
from assay.forge import open_forge
from assay.forgestate.source import read_snapshot
from assay.plumbing import ASSAY_IDENTITY, RefUpdate
from tests.desks.world import brief_text
from tests.evidence.gatekit import record
from tests.forge_fixtures import put_on_main
from tests.gatekeys import key_for


def test_a_claim_that_moves_is_read_again(forge_path: Path) -> None:
    put_on_main(forge_path, {"briefs/a.md": brief_text("a")})
    with open_forge(str(forge_path)) as forge:
        store = ClaimStore(forge)
        claim = store.acquire("a", "coder", lease_s=600, holder="h1")
        assert read_view(forge).claims["a"].state == "held"
        assert read_view(forge).claims["a"].state == "held"  # unchanged: from what was decoded
        store.release(claim, done=True)
        assert read_view(forge).claims["a"].state == "done"


def test_a_refused_record_is_refused_on_every_read(forge_path: Path) -> None:
    put_on_main(forge_path, {f"briefs/{b}.md": brief_text(b) for b in ("a", "b")})
    with open_forge(str(forge_path)) as forge:
        forged = forge.commit(
            {"claim.json": json.dumps({"v": 1, "state": "held"}).encode()},
            parents=[],
            message="a hand-made claim",
            author=ASSAY_IDENTITY,
        )
        assert forge.push([RefUpdate("refs/assay/claims/b", forged, expected=None)]).ok
        for _ in range(3):
            view = read_view(forge)
            assert "b" not in view.briefs and "a" in view.briefs
            assert any("refs/assay/claims/b" in path for path in view.bad)
            assert "b" in read_snapshot(forge).invalid


def test_evidence_read_without_a_key_is_checked_once_there_is_one(
    forge_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A record signed by the gate: seen, not checked, without a key; checked with it.
    monkeypatch.delenv("ASSAY_EVIDENCE_KEY", raising=False)
    main = put_on_main(forge_path, {"briefs/a.md": brief_text("a")})
    gate = key_for("the-gate")
    with open_forge(str(forge_path)) as forge:
        append_records(forge, "a", [record(brief="a", head_sha=main)], key=gate)
        seen = read_snapshot(forge)
        assert not seen.evidence_key and not seen.evidence["a"][0].record.signed
        monkeypatch.setenv("ASSAY_EVIDENCE_KEY", gate.text)
        checked = read_snapshot(forge)
        assert checked.evidence_key == gate.public.fingerprint
        assert checked.evidence["a"][0].record.signed
        monkeypatch.delenv("ASSAY_EVIDENCE_KEY")
        assert not read_snapshot(forge).evidence["a"][0].record.signed
