"""``assay desk run`` on the embedded forge with the scripted model, through the real CLI."""

from __future__ import annotations

import json
import subprocess

import pytest

from assay.forge import open_forge
from assay.plumbing import ASSAY_IDENTITY, RefUpdate
from tests.desks.world import World, brief_text, call, finish, write
from tests.forge_fixtures import free_port

ROW = {"id": "unit", "run": "python -c pass"}


def test_once_runs_a_brief_to_review_and_marks_the_claim_done(world: World) -> None:
    world.add_briefs(brief_text("b1", verify=[ROW]))
    world.add_desk("coder", [write("hello.txt", "hello\n"), finish("wrote it", unit="pass")])
    done = world.desk("coder", "--once", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [(r["brief"], r["status"], r["review"]) for r in report["runs"]] == [
        ("b1", "ok", "ready")
    ]
    claim = world.claim("b1")
    assert claim is not None and claim.state == "done"
    # The claim anchors the journal head the forge holds (a rewrite would not match).
    assert claim.journal_head == world.journal("b1").head
    review = world.review("b1")
    assert review is not None and review.state == "ready"
    assert review.head_sha == world.branch_tip("b1")
    assert "| unit | pass |" in review.body and "wrote it" in review.body
    assert "<!-- assay:evidence:begin -->" in review.body  # the gate's claimed-vs-verified
    assert world.tree("b1")["hello.txt"]
    # Claimed evidence and the fingerprint are in the journal, as the gate reads them.
    claimed = [e for e in world.journal("b1").entries if e.get("name") == "evidence.claimed"]
    assert len(claimed) == 1
    # Nothing left to take: exit 3 (busy / nothing claimable).
    again = world.desk("coder", "--once")
    assert again.returncode == 3, again.stderr


def test_highest_priority_first_and_loop_until_empty(world: World) -> None:
    world.add_briefs(
        brief_text("low", priority=1),
        brief_text("high", priority=9),
        brief_text("mid", priority=5),
    )
    world.add_desk("coder", [finish()])
    reports = world.run_here("coder", once=False)
    assert [(r.brief, r.code) for r in reports] == [("high", 0), ("mid", 0), ("low", 0)]


def test_a_brief_depending_on_an_unmerged_brief_is_not_taken(world: World) -> None:
    world.add_briefs(brief_text("base"), brief_text("top", depends_on=["base"]))
    world.add_desk("coder", [write("f.txt", "x"), finish()])
    assert world.desk("coder", "--brief", "top").returncode == 3  # nothing claimable
    assert world.claim("top") is None
    assert [r.brief for r in world.run_here("coder")] == ["base"]
    # Done but not merged: still not taken.
    assert world.run_here("coder") == []
    world.merge_to_main("base")
    assert [(r.brief, r.code) for r in world.run_here("coder")] == [("top", 0)]


def test_malformed_front_matter_is_65_naming_the_field(world: World) -> None:
    world.add_briefs(brief_text("good"))
    world.add_raw_brief("bad", "---\nid: bad\ntitle: Bad\npriority: urgent\n---\nbody\n")
    world.add_desk("coder", [finish()])
    named = world.desk("coder", "--brief", "bad")
    assert named.returncode == 65
    assert "briefs/bad.md" in named.stderr and "priority" in named.stderr
    # One bad file does not stop the desk from taking the good brief.
    rest = world.desk("coder", "--once", "--json")
    assert rest.returncode == 0, rest.stderr
    assert [r["brief"] for r in json.loads(rest.stdout)["runs"]] == ["good"]


def test_undeclared_tool_is_77_and_closes_the_review(world: World) -> None:
    world.add_briefs(brief_text("b1"))
    world.add_desk("coder", [{"tool_calls": [call("run", command="ls")]}])
    done = world.desk("coder", "--once", "--json")
    assert done.returncode == 77, done.stderr
    assert json.loads(done.stdout)["runs"][0]["status"] == "denied"
    denied = [e for e in world.journal("b1").entries if e["kind"] == "denied"]
    assert [e["name"] for e in denied] == ["run"]
    review = world.review("b1")
    assert review is not None and review.state == "closed"
    claim = world.claim("b1")
    assert claim is not None and claim.state == "done"


def test_write_outside_the_work_tree_is_77(world: World) -> None:
    world.add_briefs(brief_text("b1"))
    world.add_desk("coder", [write("../outside", "escaped")])
    [report] = world.run_here("coder")
    assert report.code == 77 and "leaves the work tree" in report.message
    assert not list(world.root.rglob("outside"))
    denied = [e for e in world.journal("b1").entries if e["kind"] == "denied"]
    assert [(d["name"], d["args"]["path"]) for d in denied] == [("write_file", "../outside")]
    assert "leaves the work tree" in denied[0]["reason"]
    # No compute step stands in for the runtime's entry any more.
    assert world.outputs("b1", "denied") == []


def test_budget_pauses_then_resumes_when_raised_on_main(world: World) -> None:
    world.add_briefs(brief_text("b1", budget={"model_calls": 1}))
    world.add_desk("coder", [write("a.txt", "a"), write("b.txt", "b"), finish()])
    [paused] = world.run_here("coder")
    assert (paused.code, paused.status) == (7, "paused")
    claim = world.claim("b1")
    assert claim is not None and (claim.state, claim.waiting_for) == ("waiting", "budget")
    # Still exhausted: nothing to take.
    assert world.run_here("coder") == []
    world.add_briefs(brief_text("b1", budget={"model_calls": 10}))
    [resumed] = world.run_here("coder", machine="b")
    assert (resumed.code, resumed.why) == (0, "wake")
    journal = world.journal("b1")
    models = [e for e in journal.entries if e["kind"] == "step" and e["step"] == "model"]
    assert len([e for e in models if e["status"] == "ok"]) == 3
    assert set(world.tree("b1")) >= {"a.txt", "b.txt"}


def test_command_desk_runs_its_argv_with_the_brief_in_a_file(world: World) -> None:
    world.add_briefs(brief_text("b1", body="$(touch /tmp/never) hello"))
    (world.desks / "copy.py").write_text(
        "import os, shutil\nshutil.copy(os.environ['ASSAY_BRIEF_FILE'], 'brief-copy.md')\n",
        encoding="utf-8",
    )
    manifest = world.desks / "cmd.yaml"
    manifest.write_text(
        "name: cmd\nkind: command\ntakes: {globs: ['*']}\n"
        f"command: [python3, {world.desks / 'copy.py'}]\n",
        encoding="utf-8",
    )
    [done] = world.run_here("cmd")
    assert done.code == 0, done
    assert "brief-copy.md" in world.tree("b1")
    steps = [e["name"] for e in world.journal("b1").entries if e["kind"] == "step"]
    assert steps == ["command"]


def test_unreachable_model_releases_the_claim_and_loses_nothing(world: World) -> None:
    world.add_briefs(brief_text("b1"))
    dead = {
        "adapter": "openai",
        "model": "m",
        "base_url": f"http://127.0.0.1:{free_port()}/v1",
        "api_key_env": None,
        "attempts": 1,
        "timeout_s": 5,
    }
    world.add_desk("coder", model=dead)
    [report] = world.run_here("coder")
    assert (report.code, report.status) == (69, "unavailable")
    claim = world.claim("b1")
    assert claim is not None and claim.state == "released"
    # The model is back: another desk process resumes the brief.
    world.add_desk("coder", [write("hello.txt", "hi"), finish()])
    [resumed] = world.run_here("coder", machine="b")
    assert (resumed.why, resumed.code) == ("resume", 0)


def test_a_desk_that_gives_up_is_1_with_a_closed_review(world: World) -> None:
    world.add_briefs(brief_text("b1"))
    (world.desks / "fail.yaml").write_text(
        "name: fail\nkind: command\ntakes: {globs: ['*']}\n"
        "command: [python3, -c, 'import sys; sys.exit(3)']\n",
        encoding="utf-8",
    )
    [report] = world.run_here("fail")
    assert (report.code, report.status, report.review) == (1, "failed", "closed")
    claim = world.claim("b1")
    assert claim is not None and claim.state == "done"


def test_a_corrupt_claim_record_stops_only_its_brief(world: World) -> None:
    world.add_briefs(brief_text("b1", priority=5), brief_text("b2"))
    world.add_desk("coder", [finish()])
    with open_forge(world.url, cache_dir=world.root / "raw") as forge:
        commit = forge.commit(
            {"claim.json": b"{not json"}, parents=[], message="bad", author=ASSAY_IDENTITY
        )
        assert forge.push([RefUpdate("refs/assay/claims/b1", commit, expected=None)]).ok
    named = world.desk("coder", "--brief", "b1")
    assert named.returncode == 6 and "refs/assay/claims/b1" in named.stderr
    assert [r.brief for r in world.run_here("coder")] == ["b2"]


def test_secrets_reach_neither_the_journal_nor_the_review(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "s3cr3t-0f-the-desk"
    monkeypatch.setenv("DESK_TOKEN", secret)
    world.add_briefs(brief_text("b1"))
    world.add_desk(
        "coder",
        [
            {"content": f"the token is {secret}", "tool_calls": [call("list_files", path=".")]},
            finish(f"used {secret} to finish"),
        ],
        secrets=["DESK_TOKEN"],
    )
    [report] = world.run_here("coder")
    assert report.code == 0, report
    review = world.review("b1")
    assert review is not None and "used" in review.body and secret not in review.body
    branch = subprocess.run(
        ["git", f"--git-dir={world.forge_path}", "log", "-p", "assay/b1"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    archive = subprocess.run(
        ["git", f"--git-dir={world.forge_path}", "archive", "assay/b1"],
        capture_output=True,
        check=True,
    ).stdout
    assert secret not in branch and secret.encode() not in archive


def test_assay_wake_resumes_a_budget_paused_run_once_main_raises_the_budget(
    world: World,
) -> None:
    world.add_briefs(brief_text("b1", budget={"model_calls": 1}))
    world.add_desk("coder", [write("a.txt", "a"), write("b.txt", "b"), finish()])
    [paused] = world.run_here("coder")
    assert (paused.code, paused.status) == (7, "paused")
    waker = ("wake", "--forge", world.url, "--desks", str(world.desks), "--json")
    still = world.assay(*waker)
    assert still.returncode == 0 and json.loads(still.stdout)["runs"] == [], still.stderr
    world.add_briefs(brief_text("b1", budget={"model_calls": 10}))
    woken = world.assay(*waker)
    assert woken.returncode == 0, woken.stderr
    [run] = json.loads(woken.stdout)["runs"]
    assert (run["brief"], run["why"], run["code"]) == ("b1", "wake", 0)
    claim = world.claim("b1")
    assert claim is not None and claim.state == "done"
