"""Batched merges on a real embedded forge: one push, a squash commit per brief, and a brief
that fails on the batch's combined tree left out while the rest land.

The fleet (``tests.evidence.batchkit``) is made and verified once for the module; each test
merges a copy of its forge, with a ``post-receive`` hook that logs every push the forge
took.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from assay.cli.verify import batch_report
from assay.evidence.batch import (
    NOTE_BEGIN,
    BatchEntry,
    BatchOutcome,
    BatchResult,
    merge_batch,
    ready_briefs,
    with_note,
)
from assay.forge import open_forge
from assay.forge.settings import read_settings, record_merge_budget
from tests.conftest import AssayRunner
from tests.evidence.batchkit import (
    BREAKER,
    CHEATER,
    ENVY,
    LOCKER,
    VICTIM,
    Fleet,
    log_pushes,
    pushes,
    ref,
    review,
)
from tests.evidence.gatekit import git

PLAIN = [f"b{n:02d}" for n in range(1, 11)]


@pytest.fixture(scope="module")
def gate_state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    state = tmp_path_factory.mktemp("gate-state")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ASSAY_GATE_STATE", str(state))
        yield state


@pytest.fixture(autouse=True)
def same_gate(assay_state: Path, gate_state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate key that verified the fleet (the per-test state would make a new one)."""
    monkeypatch.setenv("ASSAY_GATE_STATE", str(gate_state))


@pytest.fixture(scope="module")
def fleet(gate_state: Path, tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    made = Fleet(tmp_path_factory.mktemp("fleet"), [*PLAIN, VICTIM, BREAKER])
    made.verify_all()
    return made


def _squashes(forge: Path, before: str) -> list[dict[str, str]]:
    """Main's new commits, oldest first: each one's parent count and its trailers."""
    shas = git("--git-dir", str(forge), "rev-list", "--reverse", f"{before}..main").split()
    found = []
    for sha in shas:
        body = git("--git-dir", str(forge), "log", "-1", "--format=%P%n%B", sha)
        parents, _, message = body.partition("\n")
        trailers = dict(
            line.split(": ", 1) for line in message.splitlines() if line.startswith("Assay-")
        )
        found.append({"sha": sha, "parents": str(len(parents.split())), **trailers})
    return found


def test_ten_verified_briefs_land_as_ten_squash_commits_in_one_push(
    fleet: Fleet, tmp_path: Path
) -> None:
    forge = fleet.copy_to(tmp_path / "forge.git")
    log = log_pushes(forge)
    before = ref(forge, "refs/heads/main")
    assert before is not None
    said: list[str] = []
    with open_forge(str(forge), cache_dir=tmp_path / "cache") as handle:
        result = merge_batch(handle, PLAIN, on_progress=said.append)

    assert result.ok and result.merged and result.attempts == 1, json.dumps(result.to_json())
    assert [e.outcome for e in result.entries] == [BatchOutcome.SQUASHED] * 10
    squashes = _squashes(forge, before)
    assert [s["Assay-Brief"] for s in squashes] == PLAIN  # stacked in the order given
    assert all(s["parents"] == "1" for s in squashes)  # each a squash, one parent
    assert [s["Assay-Head"] for s in squashes] == [fleet.heads[name] for name in PLAIN]
    assert [s["sha"] for s in squashes] == [e.commit for e in result.entries]
    assert result.main_after == squashes[-1]["sha"] == ref(forge, "refs/heads/main")
    # One push carried main, every run ref and every review; no other push moved main.
    [push] = [p for p in pushes(log) if "refs/heads/main" in p]
    assert push["refs/heads/main"] == (before, result.main_after)
    for name in PLAIN:
        run = f"refs/assay/runs/{name}/1"
        assert push[run][1] == fleet.heads[name] == ref(forge, run)
        assert f"refs/assay/reviews/{name}" in push
        assert review(forge, name)["state"] == "merged"
    assert len(pushes(log)) == 1
    # No journal reached main; every brief's module did.
    files = git("--git-dir", str(forge), "ls-tree", "-r", "--name-only", "main").split()
    assert not [f for f in files if f.startswith(".assay/")]
    assert {f"{name}.py" for name in PLAIN} <= set(files)
    assert any("running b10's rows on the batch's tree (10/10)" in line for line in said)
    assert all(len(e.rows) == 1 and e.rows[0].passed for e in result.entries)


@pytest.mark.slow
def test_a_brief_failing_on_the_combined_tree_is_left_out_named_and_the_rest_land(
    fleet: Fleet, tmp_path: Path, run_assay: AssayRunner, gate_state: Path
) -> None:
    forge = fleet.copy_to(tmp_path / "forge.git")
    log = log_pushes(forge)
    before = ref(forge, "refs/heads/main")
    assert before is not None
    env = {"ASSAY_GATE_STATE": str(gate_state), "ASSAY_STATE": str(tmp_path / "state")}

    done = run_assay("merge", "--ready", "--forge", str(forge), "--json", env=env)
    assert done.returncode == 1, done.stdout + done.stderr  # one was left out
    report = json.loads(done.stdout)
    outcomes = {entry["brief"]: entry for entry in report["briefs"]}
    ready = sorted([*PLAIN, VICTIM, BREAKER])
    assert [entry["brief"] for entry in report["briefs"]] == ready
    victim = outcomes.pop(VICTIM)
    assert victim["outcome"] == "left_out" and victim["commit"] is None
    [reason] = victim["reasons"]
    assert "row 'unit' fails on the batch's combined tree" in reason
    assert "victim is wrong" in reason  # the row's own last line
    assert victim["combined_rows"][0]["passed"] is False
    assert {entry["outcome"] for entry in outcomes.values()} == {"squashed"}
    assert report["merged"] is True and report["status"] == "failed" and report["code"] == 1

    squashes = _squashes(forge, before)
    assert sorted(s["Assay-Brief"] for s in squashes) == sorted(outcomes)
    assert ref(forge, f"refs/assay/runs/{VICTIM}/1") is None
    assert ref(forge, f"refs/assay/heads/{VICTIM}") is None
    files = git("--git-dir", str(forge), "ls-tree", "-r", "--name-only", "main").split()
    assert f"{VICTIM}.py" not in files and f"{BREAKER}.py" in files
    # The reason is on the victim's review, in the batch's one push; it is still ready.
    left = review(forge, VICTIM)
    assert left["state"] == "ready"
    assert NOTE_BEGIN in left["body"] and "fails on the batch's combined tree" in left["body"]
    assert f"Merged in that batch: {', '.join(sorted(outcomes))}." in left["body"]
    [push] = pushes(log)
    assert f"refs/assay/reviews/{VICTIM}" in push and "refs/heads/main" in push

    # The next batch finds only the victim ready; on main as it is now it still fails,
    # and nothing moves main.
    with open_forge(str(forge), cache_dir=tmp_path / "cache") as handle:
        assert ready_briefs(handle) == [VICTIM]
    again = run_assay("merge", "--ready", "--forge", str(forge), "--json", env=env)
    assert again.returncode == 1
    [entry] = json.loads(again.stdout)["briefs"]
    assert entry["outcome"] == "left_out"
    assert ref(forge, "refs/heads/main") == squashes[-1]["sha"]


def test_a_lost_race_on_main_is_judged_again_from_the_new_main(
    fleet: Fleet, tmp_path: Path
) -> None:
    forge = fleet.copy_to(tmp_path / "forge.git")
    log = log_pushes(forge)
    author = tmp_path / "author"
    git("clone", "--quiet", str(forge), str(author))
    raced: list[str] = []

    def someone_pushes_first(text: str) -> None:
        if text.startswith("pushing") and not raced:
            (author / "NOTES.md").write_text("an author's change\n")
            git("add", "-A", cwd=author)
            git("commit", "--quiet", "-m", "notes", cwd=author)
            git("push", "--quiet", "origin", "main", cwd=author)
            raced.append(git("rev-parse", "HEAD", cwd=author))

    briefs = PLAIN[:3]
    with open_forge(str(forge), cache_dir=tmp_path / "cache") as handle:
        result = merge_batch(handle, briefs, on_progress=someone_pushes_first)
    assert result.ok and result.attempts == 2
    assert result.main_before == raced[0]
    squashes = _squashes(forge, raced[0])
    assert [s["Assay-Brief"] for s in squashes] == briefs
    # The author's push, then the batch's one push: nothing of the first attempt landed.
    main_moves = [p for p in pushes(log) if "refs/heads/main" in p]
    assert len(main_moves) == 2
    assert main_moves[1]["refs/heads/main"][0] == raced[0]
    for name in briefs:
        assert ref(forge, f"refs/assay/runs/{name}/1") == fleet.heads[name]


def test_the_merge_budget_spaces_batches_and_a_lost_race_gives_its_place_back(
    fleet: Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    window = 1.5
    monkeypatch.setenv("ASSAY_FORGE_BUDGET_WINDOW_SECONDS", str(window))
    forge = fleet.copy_to(tmp_path / "forge.git")
    author = tmp_path / "author"
    git("clone", "--quiet", str(forge), str(author))

    def someone_pushes_first(text: str) -> None:
        if text.startswith("pushing") and not (author / "NOTES.md").exists():
            (author / "NOTES.md").write_text("an author's change\n")
            git("add", "-A", cwd=author)
            git("commit", "--quiet", "-m", "notes", cwd=author)
            git("push", "--quiet", "origin", "main", cwd=author)

    with open_forge(str(forge), cache_dir=tmp_path / "cache") as handle:
        assert handle.merges_per_minute() == 0  # the embedded forge: unlimited unless set
        assert record_merge_budget(handle, 1)
        assert read_settings(handle).merges_per_minute == 1
        first = merge_batch(handle, PLAIN[:2], on_progress=someone_pushes_first)
        ledger = handle.merge_ledger
        assert ledger is not None and ledger.noun == "merge"
        # The first push lost its race and moved nothing: its place was given back, and
        # the second attempt went at once.
        assert first.merged and first.attempts == 2
        assert ledger.stats.pushes == 2 and ledger.stats.waits == 0
        second = merge_batch(handle, PLAIN[2:4])
    assert second.merged and ledger.stats.waits == 1
    landed = list(ledger.stats.landed)
    assert len(landed) == 2 and landed[1] - landed[0] >= window


def test_the_batch_table_fits_eighty_columns() -> None:
    entries = (
        BatchEntry("b01", BatchOutcome.SQUASHED, head_sha="a" * 40, commit="c" * 40),
        BatchEntry(
            "victim",
            BatchOutcome.LEFT_OUT,
            head_sha="b" * 40,
            reasons=(
                "row 'unit' fails on the batch's combined tree 0123456789ab (exit 1): "
                "AssertionError: victim is wrong",
            ),
        ),
    )
    result = BatchResult("d" * 40, "c" * 40, entries, attempts=1, merged=True)
    buffer = io.StringIO()
    console = Console(file=buffer, width=80, color_system=None)
    for part in batch_report(result, width=80):
        console.print(part)
    text = buffer.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "victim" in text and "left out" in text and "victim is wrong" in text
    assert "merged 1 brief(s) in one push" in text


def test_the_note_is_replaced_and_removed() -> None:
    body = with_note("Adds calc.\n", "first")
    assert body.count(NOTE_BEGIN) == 1 and "first" in body
    again = with_note(body, "second")
    assert again.count(NOTE_BEGIN) == 1 and "second" in again and "first" not in again
    assert with_note(again, None) == "Adds calc.\n"


def test_a_branch_moved_during_the_batch_is_refused_stale_and_the_rest_land(
    fleet: Fleet, tmp_path: Path
) -> None:
    """A hostile desk pushes its branch after the gate judged it, just before the batch's
    push: the branch pin makes the whole push lose, the batch is judged again, and the moved
    brief (its evidence now stale) stays out while the others land. A brief that does not
    exist is refused, named, without stopping the batch."""
    forge = fleet.copy_to(tmp_path / "forge.git")
    desk = tmp_path / "desk"
    git("clone", "--quiet", "--branch", "assay/b02", str(forge), str(desk))
    moved: list[str] = []

    def the_desk_pushes_late(text: str) -> None:
        if text.startswith("pushing") and not moved:
            (desk / "b02.py").write_text("def f():\n    return 3\n")
            git("commit", "--quiet", "-am", "late change", cwd=desk)
            git("push", "--quiet", "origin", "assay/b02", cwd=desk)
            moved.append(git("rev-parse", "HEAD", cwd=desk))

    before = ref(forge, "refs/heads/main")
    assert before is not None
    with open_forge(str(forge), cache_dir=tmp_path / "cache") as handle:
        result = merge_batch(
            handle, ["b01", "b02", "nosuch", "b03"], on_progress=the_desk_pushes_late
        )
    outcomes = {entry.brief: entry for entry in result.entries}
    assert result.attempts == 2 and result.merged and not result.ok
    assert outcomes["b02"].outcome is BatchOutcome.REFUSED
    assert outcomes["b02"].head_sha == moved[0]
    assert any("stale" in reason for reason in outcomes["b02"].reasons)
    assert outcomes["nosuch"].outcome is BatchOutcome.REFUSED
    assert "nosuch" in outcomes["nosuch"].reasons[0]
    assert [outcomes[n].outcome for n in ("b01", "b03")] == [BatchOutcome.SQUASHED] * 2
    assert [s["Assay-Brief"] for s in _squashes(forge, before)] == ["b01", "b03"]
    assert ref(forge, "refs/assay/runs/b02/1") is None
    assert review(forge, "b02")["state"] == "ready"


def test_the_cli_refuses_a_batch_it_cannot_make(run_assay: AssayRunner, tmp_path: Path) -> None:
    forge = str(tmp_path / "nowhere.git")
    nothing = run_assay("merge", "--forge", forge)
    assert nothing.returncode == 2 and "--ready" in nothing.stderr
    both = run_assay("merge", "b01", "b02", "--ff-only", "--forge", forge)
    assert both.returncode == 2 and "--ff-only" in both.stderr


def test_a_brief_that_conflicts_or_whose_environment_moves_is_left_out_and_the_rest_land(
    tmp_path: Path,
) -> None:
    names = ["clash1", "clash2", ENVY, LOCKER, "b01"]
    clash = Fleet(tmp_path / "clash", names)
    clash.verify_all()
    before = ref(clash.forge, "refs/heads/main")
    assert before is not None
    with open_forge(str(clash.forge), cache_dir=tmp_path / "cache") as handle:
        result = merge_batch(handle, names)
    outcomes = {entry.brief: entry for entry in result.entries}
    assert outcomes["clash2"].outcome is BatchOutcome.LEFT_OUT
    assert "does not merge cleanly onto the batch" in outcomes["clash2"].reasons[0]
    assert outcomes[ENVY].outcome is BatchOutcome.LEFT_OUT
    [reason] = outcomes[ENVY].reasons
    assert "environment on the batch's combined tree" in reason
    assert "lock:requirements.lock" in reason
    landed = ["clash1", LOCKER, "b01"]
    assert [outcomes[n].outcome for n in landed] == [BatchOutcome.SQUASHED] * 3
    assert [s["Assay-Brief"] for s in _squashes(clash.forge, before)] == landed
    assert "does not merge cleanly" in review(clash.forge, "clash2")["body"]
    assert "lock:requirements.lock" in review(clash.forge, ENVY)["body"]
    # Alone, on the main the batch made, clash2 conflicts with main itself: still left
    # out, named, and the batch ends without moving main (nothing else in it).
    after = ref(clash.forge, "refs/heads/main")
    with open_forge(str(clash.forge), cache_dir=tmp_path / "cache2") as handle:
        alone = merge_batch(handle, ["clash2"])
    [entry] = alone.entries
    assert entry.outcome is BatchOutcome.LEFT_OUT and not alone.merged
    assert "does not merge cleanly" in entry.reasons[0]
    assert ref(clash.forge, "refs/heads/main") == after


def test_a_branch_that_rewrites_another_briefs_check_cannot_carry_it_through(
    tmp_path: Path,
) -> None:
    """A hostile branch in the batch rewrites the victim's check file to pass: on the
    combined tree the victim's acceptance set is pinned from main, as verify pins it, so
    the victim (broken by the breaker) still fails there and is left out."""
    names = [VICTIM, BREAKER, CHEATER]
    fleet = Fleet(tmp_path / "cheat", names)
    fleet.verify_all()
    with open_forge(str(fleet.forge), cache_dir=tmp_path / "cache") as handle:
        result = merge_batch(handle, names)
    outcomes = {entry.brief: entry for entry in result.entries}
    assert outcomes[VICTIM].outcome is BatchOutcome.LEFT_OUT
    assert "victim is wrong" in outcomes[VICTIM].reasons[0]
    [row] = outcomes[VICTIM].rows
    assert row.pinned == (f"check_{VICTIM}.py",)
    assert f"check_{VICTIM}.py: edited by the desk; main's version ran" in row.notes
    assert outcomes[BREAKER].outcome is outcomes[CHEATER].outcome is BatchOutcome.SQUASHED


def test_a_brief_whose_holdout_row_fails_on_the_combined_tree_is_left_out(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    # "quiet"'s visible row checks only its own module; its holdout row also needs
    # shared.BASE to be 1, which the breaker changes. Each passes alone; on their combined
    # tree only the holdout row sees it, so it is run there too.
    names = ["quiet", BREAKER]
    made = Fleet(tmp_path / "holdout", names)
    forge = str(made.forge)
    assert run_assay("forge", "gate-key", forge, "--json").returncode == 0
    files = tmp_path / "author-files"
    files.mkdir()
    (files / "hidden_quiet.py").write_text("import shared\nassert shared.BASE == 1\n")
    added = run_assay(
        "holdout", "add", "quiet", "--id", "base", "--run", "python3 hidden_quiet.py",
        "--file", "hidden_quiet.py", "--forge", forge, cwd=files,
    )  # fmt: skip
    assert added.returncode == 0, added.stdout + added.stderr
    made.verify_all()  # the holdout row passes at quiet's own head
    with open_forge(forge, cache_dir=tmp_path / "cache") as handle:
        result = merge_batch(handle, names)
    outcomes = {entry.brief: entry for entry in result.entries}
    assert outcomes[BREAKER].outcome is BatchOutcome.SQUASHED
    assert outcomes["quiet"].outcome is BatchOutcome.LEFT_OUT
    [reason] = outcomes["quiet"].reasons
    assert "row 'holdout:base' fails on the batch's combined tree" in reason
    assert "hidden_quiet" not in json.dumps(result.to_json())  # still sealed
