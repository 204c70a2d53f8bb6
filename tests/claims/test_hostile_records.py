"""Attack: one bad record must not wedge the forge for every brief.

A claim with ``lease_s: 1e23`` (pushed with plain git, or asked for with
``claim acquire --lease 99999999999999999999999``) used to make ``claim list``, ``claim
show``, ``status``, ``board`` and ``sweep`` exit 70 for every brief. Now the CLI refuses
the lease with 65 naming the field, and readers report the one bad claim while the
other briefs keep working.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import AssayRunner
from tests.forge_fixtures import put_on_main

BRIEF = """---
id: {id}
title: Brief {id}
verify:
  - id: unit
    run: "true"
---
Do {id}.
"""


def _git(forge: Path, *args: str, input: bytes | None = None) -> str:
    done = subprocess.run(
        ["git", "--git-dir", str(forge), *args],
        input=input,
        capture_output=True,
        check=True,
        env={
            "PATH": "/usr/bin:/bin",
            "GIT_AUTHOR_NAME": "x",
            "GIT_AUTHOR_EMAIL": "x@x",
            "GIT_COMMITTER_NAME": "x",
            "GIT_COMMITTER_EMAIL": "x@x",
            "HOME": "/nonexistent",
        },
    )
    return done.stdout.decode().strip()


def _push_claim(forge: Path, brief: str, **fields: object) -> None:
    record = {
        "v": 1,
        "brief": brief,
        "desk": "coder",
        "holder": "h" * 32,
        "fence": 1,
        "state": "held",
        "since": "2026-01-01T00:00:00.000Z",
        "renewed_at": "2026-01-01T00:00:00.000Z",
        "lease_s": 300.0,
        "waiting_for": None,
        "attempt": 1,
        "journal_head": None,
        "note": "",
        **fields,
    }
    blob = _git(forge, "hash-object", "-w", "--stdin", input=json.dumps(record).encode())
    tree = _git(forge, "mktree", input=f"100644 blob {blob}\tclaim.json\n".encode())
    commit = _git(forge, "commit-tree", tree, "-m", "claim")
    _git(forge, "update-ref", f"refs/assay/claims/{brief}", commit)


def test_acquire_refuses_a_lease_past_the_bound(run_assay: AssayRunner, forge_path: Path) -> None:
    for lease in ("99999999999999999999999", "1e23", "inf", "nan", "-1", "0"):
        done = run_assay(
            "claim",
            "acquire",
            "b1",
            "--desk",
            "coder",
            "--lease",
            lease,
            "--forge",
            str(forge_path),
        )
        assert done.returncode == 65, (lease, done.stdout, done.stderr)
        assert "--lease" in done.stderr
    assert run_assay("claim", "list", "--forge", str(forge_path), "--json").returncode == 0


@pytest.mark.parametrize(
    "fields",
    [
        {"lease_s": 1e23},
        {"fence": 10**30},
        {"renewed_at": "9999-12-31T23:59:59.000Z"},
        {"note": "x" * 100_000},
    ],
    ids=["lease", "fence", "time", "note"],
)
def test_one_hostile_claim_does_not_wedge_the_others(
    run_assay: AssayRunner, forge_path: Path, fields: dict[str, object]
) -> None:
    put_on_main(forge_path, {f"briefs/{b}.md": BRIEF.format(id=b) for b in ("good", "bad")})
    forge = ["--forge", str(forge_path)]
    assert run_assay("claim", "acquire", "good", "--desk", "coder", *forge).returncode == 0
    _push_claim(forge_path, "bad", **fields)

    listed = run_assay("claim", "list", "--json", *forge)
    assert listed.returncode in (0, 6), listed.stderr
    payload = json.loads(listed.stdout)
    assert "good" in json.dumps(payload)
    assert "bad" in json.dumps(payload)  # reported, with the reason, not hidden

    shown = run_assay("claim", "show", "bad", *forge)
    assert shown.returncode == 6, shown.stdout + shown.stderr
    assert "refs/assay/claims/bad" in shown.stderr
    assert run_assay("claim", "show", "good", *forge).returncode == 0

    status = run_assay("status", "--json", *forge)
    assert status.returncode == 0, status.stdout + status.stderr
    rows = {row["id"]: row for row in json.loads(status.stdout)["briefs"]}
    assert rows["good"]["state"] == "held"
    # The note is the claim decoder's message, which names the refused ref.
    assert rows["bad"]["state"] == "invalid"
    assert rows["bad"]["status_note"].startswith("claim refs/assay/claims/bad at ")
    sweep = run_assay("sweep", "--dry-run", "--json", *forge)
    assert sweep.returncode == 0, sweep.stdout + sweep.stderr
    assert json.loads(sweep.stdout)["claims"] == 2
    board = run_assay("board", *forge, cwd=forge_path.parent)
    assert board.returncode != 70, board.stderr


def test_an_oversized_status_record_is_quarantined_for_its_brief(
    run_assay: AssayRunner, forge_path: Path
) -> None:
    put_on_main(forge_path, {f"briefs/{b}.md": BRIEF.format(id=b) for b in ("good", "bad")})
    forge = ["--forge", str(forge_path)]
    assert run_assay("claim", "acquire", "good", "--desk", "coder", *forge).returncode == 0
    record = {"v": 1, "kind": "status", "brief": "bad", "state": "working", "note": "x" * 1_000_000}
    blob = _git(forge_path, "hash-object", "-w", "--stdin", input=json.dumps(record).encode())
    tree = _git(forge_path, "mktree", input=f"100644 blob {blob}\trecord.json\n".encode())
    _git(
        forge_path,
        "update-ref",
        "refs/assay/status/bad",
        _git(forge_path, "commit-tree", tree, "-m", "s"),
    )
    status = run_assay("status", "--json", *forge)
    assert status.returncode == 0, status.stderr
    rows = {row["id"]: row for row in json.loads(status.stdout)["briefs"]}
    assert rows["good"]["state"] == "held"
    assert "status record refused" in rows["bad"]["status_note"]
    assert len(status.stdout) < 100_000  # the megabyte note is not shown
    sweep = run_assay("sweep", "--json", *forge)
    assert sweep.returncode == 0, sweep.stderr
