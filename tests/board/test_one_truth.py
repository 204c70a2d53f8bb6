"""One truth: random histories on a real embedded forge read the same everywhere.

Hypothesis builds briefs with random claims (held, expired, renewed, stuck, released,
waiting, done, corrupt), journals, events, evidence rows (a failing row at the head is a
gate refusal) and reviews (ready or merged), then checks that the board, ``assay status
--json``, ``assay resync --json``, ``assay claim list --json`` and the sweepers' dry-run
plan (stuck claims, wakes, and the state honest-status corrects a stale status to) agree
about every brief, and that a bad record makes only its own brief ``invalid``.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.claims import ClaimStore
from assay.cli.main import root
from assay.desks.records.events import EventLog
from assay.desks.records.review import write_review
from assay.evidence.records import EvidenceRecord
from assay.evidence.store import append_records
from assay.forge import Forge, RefLog, init_forge, open_forge
from assay.forgestate.rows import collect_board
from assay.plumbing import ASSAY_IDENTITY, RefUpdate
from assay.runtime import Budget, Run, execute
from tests.forge_fixtures import put_on_main
from tests.gatekeys import key_for

CLAIMS = ("none", "held", "expired", "renewed", "stuck", "released", "waiting", "done", "corrupt")
JOURNALS = ("none", "ok", "wait", "budget")
GATE_KEY = key_for("truth-gate")


@dataclass(frozen=True)
class Plan:
    claim: str
    journal: str
    event: str
    evidence: str
    review: str
    working: bool  # a status record still says "working" (honest-status corrects it)


plans = st.builds(
    Plan,
    claim=st.sampled_from(CLAIMS),
    journal=st.sampled_from(JOURNALS),
    event=st.sampled_from(("none", "approve", "cancel")),
    evidence=st.sampled_from(("none", "pass", "fail")),
    review=st.sampled_from(("none", "ready", "merged", "main")),  # main: the branch reached main
    working=st.booleans(),
)

# What a claim-list status allows the brief's one state to be (merged and invalid aside).
ALLOWED = {
    "held": {"held", "paused"},
    "expired": {"expired"},
    "stuck": {"stuck"},
    "waiting": {"waiting", "paused", "cancelled"},
    "released": {"released", "paused", "cancelled"},
    "done": {"in review", "refused", "closed"},
}


def _brief(brief: str) -> str:
    return (
        f"---\nid: {brief}\ntitle: {brief}\nverify:\n  - id: unit\n    run: 'true'\n---\nDo it.\n"
    )


def _journal(kind: str, directory: Path) -> dict[str, bytes]:
    def desk(run: Run, _: Any) -> Any:
        run.step("first", lambda: 1)
        if kind == "wait":
            run.wait_for("approval")
        run.step("second", lambda: 2)
        return "done"

    budget = Budget(steps=1) if kind == "budget" else None
    execute(desk, None, journal_dir=directory, fence=1, budget=budget, fsync=False)
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def _evidence(brief: str, head: str, *, passed: bool) -> EvidenceRecord:
    return EvidenceRecord(
        brief=brief,
        row="unit",
        command="true",
        exit=0 if passed else 1,
        timed_out=False,
        seconds=0.1,
        output_sha256="sha256:" + "0" * 64,
        output_bytes=0,
        output_tail="",
        head_sha=head,
        env_fingerprint={},
        verifier="gate:ci",
        journal_head="",
        at="2026-03-01T12:00:00Z",
    )


def _claim(store: ClaimStore, forge: Forge, brief: str, kind: str) -> None:
    if kind == "none":
        return
    if kind == "corrupt":
        bad = forge.commit(
            {"claim.json": b'{"v": 1}'}, parents=[], message="x", author=ASSAY_IDENTITY
        )
        assert forge.push([RefUpdate(f"refs/assay/claims/{brief}", bad, expected=None)]).ok
        return
    lease = 0.001 if kind in {"expired", "stuck"} else 3600.0
    claim = store.acquire(brief, "coder", lease_s=lease, holder=f"h-{brief}")
    if kind == "renewed":
        store.renew(claim)
    elif kind == "stuck":
        store.mark_stuck(claim.record, by="sweeper", note="test", require_expired=False)
    elif kind == "released":
        store.release(claim)
    elif kind == "waiting":
        store.set_waiting(claim, "approval")
    elif kind == "done":
        store.release(claim, done=True)


def _merge_to_main(forge: Forge, head: str, files: dict[str, bytes]) -> None:
    """A merge commit of main and ``head`` on main (the tree keeps the briefs)."""
    main = forge.fetch(["refs/heads/main"])["refs/heads/main"]
    merge = forge.commit(files, parents=[main, head], message="merge", author=ASSAY_IDENTITY)
    assert forge.push([RefUpdate("refs/heads/main", merge, expected=main)]).ok


def _build(root_dir: Path, briefs: list[Plan]) -> Path:
    forge_path = init_forge(root_dir / "forge.git")
    names = [f"b{index}" for index in range(len(briefs))]
    on_main = {f"briefs/{n}.md": _brief(n) for n in names}
    main = put_on_main(forge_path, on_main)
    with open_forge(str(forge_path)) as forge:
        store = ClaimStore(forge, skew_s=0)
        for name, plan in zip(names, briefs, strict=True):
            head = ""
            if plan.journal != "none" or plan.review != "none" or plan.evidence != "none":
                files = {"work.txt": name.encode()}
                if plan.journal != "none":
                    journal = _journal(plan.journal, root_dir / "journals" / name)
                    files |= {f".assay/journal/{name}/{k}": v for k, v in journal.items()}
                head = forge.commit(files, parents=[main], message=name, author=ASSAY_IDENTITY)
                branch = RefUpdate(f"refs/heads/assay/{name}", head, expected=None)
                assert forge.push([branch]).ok
            _claim(store, forge, name, plan.claim)
            if plan.event != "none":
                EventLog(forge, name).append(plan.event)
            if plan.evidence != "none":
                passed = plan.evidence == "pass"
                record = _evidence(name, head, passed=passed)
                append_records(forge, name, [record], key=GATE_KEY)
            if plan.review in {"ready", "merged"}:
                write_review(forge, name, head_sha=head, title=name, body="", state=plan.review)
            elif plan.review == "main" and head:
                _merge_to_main(forge, head, {k: v.encode() for k, v in on_main.items()})
            if plan.working:
                RefLog.for_brief(forge, "status", name).append(
                    {"state": "working", "note": "a mirror said so"}, author=ASSAY_IDENTITY
                )
    return forge_path


def _cli(*args: str) -> dict[str, Any]:
    done = CliRunner().invoke(root, list(args), catch_exceptions=False)
    data: dict[str, Any] = json.loads(done.output)
    return data


@settings(
    max_examples=int(os.environ.get("ASSAY_TRUTH_EXAMPLES", "6")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(briefs=st.lists(plans, min_size=2, max_size=4))
def test_every_reader_agrees_about_every_brief(
    briefs: list[Plan], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASSAY_CLAIM_SKEW", "0")
    # Evidence is signed by default: the readers count only records the gate's key signed.
    monkeypatch.setenv("ASSAY_EVIDENCE_KEY", GATE_KEY.text)
    with tempfile.TemporaryDirectory(prefix="assay-truth-") as scratch:
        root_dir = Path(scratch)
        monkeypatch.setenv("ASSAY_STATE", str(root_dir / "state"))
        forge_path = _build(root_dir, briefs)
        sweepers = root_dir / "sweepers"
        sweepers.mkdir()
        (sweepers / "stuck.yaml").write_text("kind: stuck-claims\nskew_s: 0\n")
        (sweepers / "waker.yaml").write_text("kind: waker\ndispatch: none\n")
        (sweepers / "honest.yaml").write_text("kind: honest-status\nskew_s: 0\n")
        spec = str(forge_path)
        with open_forge(spec) as forge:
            # as of now, as status judges leases (BOARD.md is drawn as of the forge's instant)
            now = datetime.now(UTC)
            board = {row.id: row for row in collect_board(forge, now=now)[0].rows}
        status = {r["id"]: r for r in _cli("status", "--json", "--forge", spec)["briefs"]}
        resync = {r["brief"]: r for r in _cli("resync", "--json", "--forge", spec)["briefs"]}
        listed = _cli("claim", "list", "--json", "--skew", "0", "--forge", spec)
        plan = _cli("sweep", "--dry-run", "--json", "--sweepers", str(sweepers), "--forge", spec)

    claims = {row["brief"]: row["status"] for row in listed["claims"]}
    stuck = {a["brief"] for a in plan["actions"] if a["action"] == "mark-stuck"}
    woken = {a["brief"] for a in plan["actions"] if a["action"] == "wake"}
    rewritten = {
        a["brief"] for a in plan["actions"] if "state" in a and a["action"] != "correct-status"
    }
    corrected = {a["brief"]: a["state"] for a in plan["actions"] if a["action"] == "correct-status"}
    for index, brief in enumerate(briefs):
        name = f"b{index}"
        state = status[name]["state"]
        # board, status and resync say the same state, last step and fence
        assert board[name].state == state == resync[name]["state"], (name, brief)
        assert board[name].last_step == status[name]["last_step"] == resync[name]["last_step"]
        # a stale "working" status is corrected to exactly the state every reader shows,
        # unless a live claim makes it true or another action of this sweep rewrites it
        live = claims.get(name) == "held"
        assert (name in corrected) == (brief.working and not live and name not in rewritten)
        assert corrected.get(name, state) == state, (name, brief, corrected)
        if brief.claim == "corrupt":
            assert state == "invalid" and "claim" in status[name]["status_note"]
            assert name not in claims and listed["status"] == "corrupt"
            continue
        reached_main = brief.review == "main" and brief.journal != "none"
        if brief.review == "merged" or reached_main:
            assert state == "merged"
        elif brief.claim in {"none"}:
            assert state in {"queued", "cancelled"}
        else:
            assert state in ALLOWED[claims[name]], (name, brief, claims[name], state)
        if brief.claim == "done" and brief.evidence == "fail" and state != "merged":
            assert state == "refused"  # the gate refused it: never done, never merged
        # the sweepers act exactly where the readers see an expired lease or a wake
        assert (name in stuck) == (state == "expired"), (name, brief, plan["actions"])
        if name in woken:
            assert claims[name] == "waiting"
