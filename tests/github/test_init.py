"""``assay init`` writes a working starter set, refuses to clobber, and ships in the package."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from assay.briefs import load_brief_dir
from assay.desks import load_desks
from assay.errors import BadInput
from assay.github.init import TEMPLATES, init_repository, starter_files
from assay.sweep.policy import load_policies
from tests.conftest import REPO_ROOT, AssayRunner

WORKFLOWS = {
    "assay-board.yml",
    "assay-desk.yml",
    "assay-events.yml",
    "assay-gate.yml",
    "assay-sweep.yml",
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    target = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(target)], check=True)
    return target


def test_init_into_an_empty_repository_writes_the_starter_set(
    repo: Path, run_assay: AssayRunner
) -> None:
    done = run_assay("init", str(repo), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "ok" and report["rest"]["calls"] == 0
    paths = {row["path"] for row in report["files"] if row["action"] == "written"}
    assert {f".github/workflows/{name}" for name in WORKFLOWS} <= paths
    for folder in ("desks", "briefs", "sweepers", "board_templates"):
        assert any(path.startswith(folder + "/") for path in paths), folder
    assert paths == set(starter_files())
    # What was written is usable by the parts that read it.
    assert "example" in load_desks(repo / "desks")
    assert load_brief_dir(repo / "briefs")
    assert {policy.kind for policy in load_policies(repo / "sweepers")} >= {"stuck-claims", "waker"}
    assert (repo / "board_templates" / "board.md.j2").read_text().strip()


def test_init_twice_changes_nothing(repo: Path, run_assay: AssayRunner) -> None:
    assert run_assay("init", str(repo)).returncode == 0
    again = run_assay("init", str(repo), "--json")
    assert again.returncode == 0
    assert {row["action"] for row in json.loads(again.stdout)["files"]} == {"unchanged"}


def test_init_refuses_to_overwrite_and_writes_nothing(repo: Path, run_assay: AssayRunner) -> None:
    mine = repo / ".github" / "workflows" / "assay-desk.yml"
    mine.parent.mkdir(parents=True)
    mine.write_text("name: mine\n")
    done = run_assay("init", str(repo))
    assert done.returncode == 65
    assert "assay-desk.yml" in done.stderr and "--force" in done.stderr
    assert mine.read_text() == "name: mine\n"
    assert (
        not (repo / "desks").exists() and not (repo / ".github/workflows/assay-gate.yml").exists()
    )
    forced = run_assay("init", str(repo), "--force", "--json")
    assert forced.returncode == 0
    actions = {row["path"]: row["action"] for row in json.loads(forced.stdout)["files"]}
    assert actions[".github/workflows/assay-desk.yml"] == "overwritten"
    assert mine.read_bytes() == (TEMPLATES / "workflows" / "assay-desk.yml").read_bytes()


def test_init_refuses_a_file_as_target_and_a_directory_in_the_way(tmp_path: Path) -> None:
    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(BadInput, match="not a directory"):
        init_repository(afile)
    (tmp_path / "repo" / "desks" / "example.yaml").mkdir(parents=True)
    with pytest.raises(BadInput, match=r"example\.yaml"):
        init_repository(tmp_path / "repo", force=True)


def test_init_without_a_directory_uses_the_current_one(repo: Path, run_assay: AssayRunner) -> None:
    assert run_assay("init", cwd=repo).returncode == 0
    assert (repo / ".github" / "workflows" / "assay-desk.yml").is_file()


@pytest.mark.parametrize(
    "relative",
    sorted(p for p in starter_files() if not p.startswith(".github/")),
)
def test_starter_files_are_this_repositorys_own(relative: str) -> None:
    packaged = starter_files()[relative]
    assert packaged.read_bytes() == (REPO_ROOT / relative).read_bytes(), (
        f"{relative} changed: run `python -m tests.github.sync_templates`"
    )


def test_the_templates_are_declared_as_package_data() -> None:
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    assert '"github/templates/**/*"' in pyproject
