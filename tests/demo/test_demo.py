"""``assay demo`` end to end: the whole story on a served embedded forge, and its invariants."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import AssayRunner, assay_argv, assay_env


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, object], Path]:
    directory = tmp_path_factory.mktemp("demo") / "run"
    done = subprocess.run(
        assay_argv("demo", "--dir", str(directory), "--json", "--seed", "3"),
        env=assay_env(),
        cwd=directory.parent,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout), directory


def assert_the_story_was_told(report: dict[str, object], *, briefs: int = 6) -> None:
    """What every telling of the demo's story shows: no model call repaid, no brief claimed
    twice, the injected crash recovered, the forged evidence caught, the approval waited
    for, every one of the ``briefs`` filed merged but the palindrome brief, which the gate
    blocked."""
    assert report["repaid_model_calls"] == 0
    # Requests, not only answers: at most the one in flight at the kill went upstream twice.
    assert report["repeated_requests"] <= report["crashes_injected"]  # type: ignore[operator]
    assert report["double_claims"] == 0
    assert report["crashes_injected"] == 1
    assert report["crashes_recovered"] == 1
    assert report["forged_evidence_caught"] == 1
    # The caught desk's push of its own head to main, with its own token: refused.
    assert report["refused_pushes"] == 1
    assert report["approvals_waited"] == 1
    assert report["briefs_total"] == briefs
    assert report["briefs_merged"] == briefs - 1
    assert report["blocked"] == ["palindrome"]


def test_the_demo_keeps_every_promise(demo_run: tuple[int, dict[str, object], Path]) -> None:
    code, report, _directory = demo_run
    assert report["problems"] == []
    assert code == 0
    assert_the_story_was_told(report)
    assert report["briefs_total"] == 6
    assert report["sandboxed"] is True  # bubblewrap is installed by .ci/install
    assert isinstance(report["kill_to_resume_s"], float)
    assert isinstance(report["seconds"], float)


def test_the_demo_leaves_a_board_and_a_forge(demo_run: tuple[int, dict[str, object], Path]) -> None:
    _code, report, directory = demo_run
    board = Path(str(report["board_path"])).read_text(encoding="utf-8")
    for brief in ("slugify", "reverse-words", "title-case", "palindrome", "changelog"):
        assert brief in board
    assert Path(str(report["board_html_path"])).read_text(encoding="utf-8").startswith("<!")
    assert Path(str(report["forge_path"])).is_dir()
    assert not (directory / "state").exists()  # work trees are scratch unless --keep


def _git(forge: str, *args: str) -> str:
    done = subprocess.run(
        ["git", f"--git-dir={forge}", *args], capture_output=True, text=True, check=True
    )
    return done.stdout


def assert_main_is_the_teams(
    report: dict[str, object], history: Callable[[str], subprocess.CompletedProcess[str]]
) -> None:
    """Main after the demo: no ``.assay/`` path, one squash commit per merged brief (its
    trailer naming it), no checkpoint commit; each merged run kept whole under its run ref,
    and ``history(brief)`` (``assay history --brief BRIEF --json``) shows every step of it."""
    forge = str(report["forge_path"])
    assert _git(forge, "ls-tree", "-r", "--name-only", "main", ".assay") == ""
    briefs = [
        line.split(": ", 1)[1]
        for line in _git(forge, "log", "--format=%(trailers:key=Assay-Brief)", "main").splitlines()
        if line
    ]
    assert sorted(briefs) == sorted(str(b) for b in report["merged"])  # type: ignore[attr-defined]
    assert _git(forge, "log", "--format=%H", "--grep=: model", "main") == ""  # no checkpoint
    for brief in map(str, report["merged"]):  # type: ignore[call-overload]
        [run] = _git(
            forge, "for-each-ref", "--format=%(refname)", f"refs/assay/runs/{brief}/"
        ).split()
        listed = _git(forge, "ls-tree", "--name-only", run, f".assay/journal/{brief}/").split()
        segments = [path for path in listed if path.endswith(".jsonl")]
        assert segments
        steps = sum(
            json.loads(line)["kind"] == "step"
            for segment in segments
            # by newlines alone: a line's JSON may hold other line separators (U+2028)
            for line in _git(forge, "show", f"{run}:{segment}").split("\n")
            if line
        )
        done = history(brief)
        assert done.returncode == 0, done.stderr
        shown = [json.loads(line) for line in done.stdout.split("\n") if line]
        assert steps and sum(line.get("kind") == "step" for line in shown) == steps


def assert_the_refused_review_shows_only_code(report: dict[str, object]) -> None:
    """The review (the branch) of the brief the gate refused: its diff against main names
    no ``.assay/`` path, and it has one commit per checkpoint that changed the code; its
    checkpoints, journal included, are on its journal ref."""
    forge = str(report["forge_path"])
    [brief] = report["blocked"]  # type: ignore[misc]
    branch, journal = f"refs/heads/assay/{brief}", f"refs/assay/journal/{brief}"
    base = _git(forge, "merge-base", "main", branch).strip()
    changed = _git(forge, "diff", "--name-only", base, branch).split()
    assert changed and not [path for path in changed if path.startswith(".assay")]
    assert _git(forge, "ls-tree", "-r", "--name-only", branch, ".assay") == ""
    # The checkpoints: every durability point, the journal included.
    assert _git(forge, "ls-tree", "-r", "--name-only", journal, f".assay/journal/{brief}")
    checkpoints = _git(forge, "rev-list", "--first-parent", f"{base}..{journal}").split()
    code_changing = 0
    for checkpoint in checkpoints:
        paths = _git(forge, "diff", "--name-only", f"{checkpoint}~1", checkpoint).split()
        code_changing += any(not path.startswith(".assay/") for path in paths)
    commits = int(_git(forge, "rev-list", "--count", f"{base}..{branch}").strip())
    assert commits == code_changing
    assert commits < len(checkpoints)  # model calls moved the journal ref alone


def test_main_holds_one_commit_per_merged_brief_and_no_journal(
    demo_run: tuple[int, dict[str, object], Path], run_assay: AssayRunner
) -> None:
    _code, report, _directory = demo_run
    forge = str(report["forge_path"])
    assert_main_is_the_teams(
        report, lambda brief: run_assay("history", "--brief", brief, "--forge", forge, "--json")
    )


def test_the_refused_briefs_review_shows_only_its_code(
    demo_run: tuple[int, dict[str, object], Path],
) -> None:
    _code, report, _directory = demo_run
    assert_the_refused_review_shows_only_code(report)


def test_too_few_briefs_is_a_usage_error(run_assay: AssayRunner, tmp_path: Path) -> None:
    done = run_assay("demo", "--dir", str(tmp_path / "d"), "--briefs", "2")
    assert done.returncode == 2
    assert "--briefs" in done.stderr


def test_a_foreign_folder_is_not_wiped(run_assay: AssayRunner, tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me", encoding="utf-8")
    done = run_assay("demo", "--dir", str(precious), "--json")
    assert done.returncode == 2
    assert json.loads(done.stdout)["status"] == "usage"
    assert (precious / "notes.txt").read_text(encoding="utf-8") == "keep me"


def test_the_refused_brief_is_never_done_or_merged_anywhere(
    demo_run: tuple[int, dict[str, object], Path], run_assay: AssayRunner
) -> None:
    """One vocabulary: the board, its HTML page, status and resync say the same state."""
    import re

    _code, report, _directory = demo_run
    forge = str(report["forge_path"])
    markdown = Path(str(report["board_path"])).read_text(encoding="utf-8")
    html = Path(str(report["board_html_path"])).read_text(encoding="utf-8")
    board: dict[str, str] = {}
    group = ""
    for line in markdown.splitlines():
        if line.startswith("## "):
            group = line[3:]
        elif match := re.match(r"^\| ([a-z][a-z0-9-]*) \|", line):
            board[match.group(1)] = group
    # The id cell links to the brief's run page when it has one.
    rows = re.findall(
        r'<tr class="brief" data-state="([^"]+)"><td>(?:<a href="[^"]*">)?([^<]+)(?:</a>)?</td>',
        html,
    )
    page = {brief: state for state, brief in rows}
    status = json.loads(run_assay("status", "--json", "--forge", forge).stdout)
    resync = json.loads(run_assay("resync", "--json", "--forge", forge).stdout)
    said = {
        "status": {row["id"]: (row["state"], row["last_step"]) for row in status["briefs"]},
        "resync": {row["brief"]: (row["state"], row["last_step"]) for row in resync["briefs"]},
    }
    assert said["status"] == said["resync"]
    assert said["status"]["palindrome"][0] == "refused"
    assert board["palindrome"].startswith("Refused") and page["palindrome"] == "refused"
    merged = report["merged"]
    assert isinstance(merged, list) and merged
    for brief in merged:
        assert said["status"][brief][0] == "merged" == page[brief]
        assert board[brief].startswith("Merged")
    assert {step for _state, step in said["status"].values()} == {"compute:evidence.claimed"}


@pytest.mark.slow
def test_without_bubblewrap_the_demo_runs_unsandboxed_and_says_so(tmp_path: Path) -> None:
    # The README's first command on a machine with no bubblewrap: the demo still tells its
    # story, but every unconfined run is declared, recorded and shown, never silent.
    directory = tmp_path / "run"
    done = subprocess.run(
        assay_argv("demo", "--dir", str(directory), "--json", "--seed", "3"),
        env=assay_env({"ASSAY_BWRAP": str(tmp_path / "no-bwrap-here")}),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.stdout, done.stderr
    report = json.loads(done.stdout)
    assert done.returncode == 0, report.get("problems", report)
    assert report["sandboxed"] is False
    assert report["briefs_merged"] == 5
    assert report["blocked"] == ["palindrome"]
    manifest = (directory / "desks" / "demo.yaml").read_text(encoding="utf-8")
    assert "isolation: 'off'" in manifest or "isolation: off" in manifest
    board = Path(str(report["board_path"])).read_text(encoding="utf-8")
    assert "unsandboxed run" in board
