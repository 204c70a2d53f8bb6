"""The gate reads a brief's claim record with the claims owner's strict decoder.

A forged or garbled claim record on one brief is ``Corrupt`` for that brief: its verify
stops, nothing of it merges, and the other briefs' verify and merge are untouched.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay.claims import ClaimRecord
from assay.errors import AssayError, Corrupt
from assay.evidence.gate import merge, verify
from assay.forge import open_forge
from tests.evidence.gatekit import BRIEF, Scene, git

GOOD = "def add(a, b):\n    return a + b\n"


def _claim(**changes: object) -> bytes:
    record = ClaimRecord(
        brief=BRIEF,
        desk="coder",
        holder="h1",
        fence=1,
        state="done",
        since="2026-01-01T00:00:00.000Z",
        renewed_at="2026-01-01T00:00:00.000Z",
        lease_s=60.0,
    ).to_json()
    record.update(changes)
    return json.dumps(record).encode()


GARBLED = {
    "not json": b'{"desk": "coder", ',
    "a desk that is not a string": _claim(desk=5),
    "an unknown state": _claim(state="merged-by-me"),
    "another brief's record": _claim(brief="other"),
    "no holder field": json.dumps(
        {k: v for k, v in json.loads(_claim()).items() if k != "holder"}
    ).encode(),
}


def _write_claim(scene: Scene, brief: str, data: bytes) -> None:
    gd = ["--git-dir", str(scene.forge)]
    blob = git(*gd, "hash-object", "-w", "--stdin", input=data)
    tree = git(*gd, "mktree", input=f"100644 blob {blob}\tclaim.json\n".encode())
    commit = git(*gd, "commit-tree", tree, "-m", "claim")
    git(*gd, "update-ref", f"refs/assay/claims/{brief}", commit)


@pytest.fixture
def scene(tmp_path: Path) -> Scene:
    scene = Scene(tmp_path)
    head = scene.desk_commit({"calc.py": GOOD}, claims={"unit": "pass", "lint": "pass"})
    scene.open_review(head)
    return scene


@pytest.mark.parametrize("what", sorted(GARBLED))
def test_a_garbled_claim_record_is_corrupt_for_its_brief_and_nothing_merges(
    scene: Scene, what: str
) -> None:
    _write_claim(scene, BRIEF, GARBLED[what])
    main_before = scene.main_sha()
    with open_forge(str(scene.forge), cache_dir=scene.cache) as forge:
        with pytest.raises(Corrupt) as caught:
            verify(forge, BRIEF, verifier="gate:ci")
        assert f"refs/assay/claims/{BRIEF}" in caught.value.message
        with pytest.raises(AssayError):
            merge(forge, BRIEF)
    assert scene.main_sha() == main_before
    assert scene.ref(f"refs/assay/evidence/{BRIEF}") is None  # nothing half-written


def test_a_garbled_claim_on_another_brief_does_not_wedge_this_one(scene: Scene) -> None:
    _write_claim(scene, "other", GARBLED["not json"])
    main_before = scene.main_sha()
    with open_forge(str(scene.forge), cache_dir=scene.cache) as forge:
        assert verify(forge, BRIEF, verifier="gate:ci").passed
        merge(forge, BRIEF)
    assert scene.main_sha() not in {None, main_before}
