"""``assay brief``: new, add (to a real embedded forge, over file:// and smart HTTP), list, show."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from assay.briefs import parse_brief
from assay.forge import open_forge
from tests.conftest import AssayRunner, assay_argv, assay_env, popen_assay
from tests.forge_fixtures import Served, clone

BRIEF = """\
---
id: {id}
title: Brief {id}
priority: {priority}
labels: [python]
{extra}verify:
  - id: unit
    run: pytest -q
---
Body of {id}.
"""


def write_brief(directory: Path, brief_id: str, *, priority: int = 0, extra: str = "") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{brief_id}.md"
    path.write_text(BRIEF.format(id=brief_id, priority=priority, extra=extra))
    return path


def main_files(forge_path: Path) -> dict[str, str]:
    """``{path: mode}`` of every file on the forge's main."""
    done = subprocess.run(
        ["git", "--git-dir", str(forge_path), "ls-tree", "-r", "main"],
        capture_output=True,
        text=True,
        check=True,
    )
    files: dict[str, str] = {}
    for line in done.stdout.splitlines():
        meta, path = line.split("\t")
        files[path] = meta.split()[0]
    return files


def main_sha(forge_path: Path) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(forge_path), "rev-parse", "main"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_new_writes_a_valid_template_and_never_overwrites(
    run_assay: AssayRunner, tmp_path: Path
) -> None:
    done = run_assay("brief", "new", "fix-login", "--label", "auth", "--priority", "4", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["path"] == "briefs/fix-login.md"
    path = tmp_path / "briefs" / "fix-login.md"
    brief = parse_brief(path.read_text(), source="briefs/fix-login.md")
    assert (brief.title, brief.labels, brief.priority) == ("Fix login", ["auth"], 4)
    assert [row.id for row in brief.verify] == ["tests"]
    path.write_text(path.read_text() + "my edits\n")
    again = run_assay("brief", "new", "fix-login")
    assert again.returncode == 65
    assert "already exists" in again.stderr
    assert path.read_text().endswith("my edits\n")
    unsafe = run_assay("brief", "new", "../escape")
    assert unsafe.returncode == 65
    assert not (tmp_path / "escape.md").exists()


def test_list_and_show_from_a_directory(run_assay: AssayRunner, tmp_path: Path) -> None:
    write_brief(tmp_path / "briefs", "low")
    write_brief(tmp_path / "briefs", "high", priority=9, extra="depends_on: [low]\n")
    done = run_assay("brief", "list", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["briefs"]
    assert [r["id"] for r in rows] == ["high", "low"]
    assert rows[0]["depends_on"] == ["low"] and rows[0]["verify"] == ["unit"]
    table = run_assay("brief", "list")
    assert table.returncode == 0 and "high" in table.stdout and "low" in table.stdout
    shown = run_assay("brief", "show", "high", "--json")
    assert json.loads(shown.stdout)["brief"]["body"] == "Body of high.\n"
    text = run_assay("brief", "show", "high")
    assert text.stdout.startswith("---\nid: high\n")
    missing = run_assay("brief", "show", "nope")
    assert missing.returncode == 65 and "no brief 'nope'" in missing.stderr


def test_a_malformed_brief_is_65_naming_file_line_and_field(
    run_assay: AssayRunner, tmp_path: Path
) -> None:
    path = write_brief(tmp_path / "briefs", "broken")
    path.write_text(path.read_text().replace("    run: pytest -q\n", "    timeout: 3\n"))
    done = run_assay("brief", "list", "--json")
    assert done.returncode == 65
    error = json.loads(done.stdout)
    assert error["status"] == "bad_input"
    assert (
        error["message"] == f"{Path('briefs') / 'broken.md'} line 7: verify[0].run: field required"
    )


def test_add_needs_a_forge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_brief(tmp_path / "drafts", "a")
    monkeypatch.delenv("ASSAY_FORGE", raising=False)
    done = subprocess.run(
        assay_argv("brief", "add", str(path)),
        cwd=tmp_path,
        env=assay_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--forge" in done.stderr


def test_add_commits_to_main_and_keeps_everything_else(
    run_assay: AssayRunner, tmp_path: Path, forge_path: Path
) -> None:
    # Main already holds an executable script: filing a brief must not touch its mode.
    work = clone(str(forge_path), tmp_path / "work")
    (work / "tool.sh").write_text("#!/bin/sh\necho hi\n")
    (work / "tool.sh").chmod(0o755)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    for args in (["add", "tool.sh"], ["commit", "-qm", "tool"], ["push", "-q", "origin", "main"]):
        subprocess.run(["git", *args], cwd=work, env=env, check=True, capture_output=True)
    before = main_files(forge_path)
    assert before["tool.sh"] == "100755"

    path = write_brief(tmp_path / "drafts", "add-median")
    done = run_assay("brief", "add", str(path), "--forge", str(forge_path), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["path"] == "briefs/add-median.md" and result["unchanged"] is False
    assert result["commit"] == main_sha(forge_path)
    after = main_files(forge_path)
    assert after == {**before, "briefs/add-median.md": "100644"}
    with open_forge(str(forge_path)) as forge:
        assert forge.read_blob(result["commit"], "briefs/add-median.md") == path.read_bytes()

    listed = run_assay("brief", "list", "--forge", str(forge_path), "--json")
    assert [r["id"] for r in json.loads(listed.stdout)["briefs"]] == ["add-median"]

    # The same bytes again change nothing; other bytes need --replace.
    again = run_assay("brief", "add", str(path), "--forge", str(forge_path), "--json")
    assert json.loads(again.stdout)["unchanged"] is True
    assert main_sha(forge_path) == result["commit"]
    path.write_text(path.read_text().replace("priority: 0", "priority: 5"))
    refused = run_assay("brief", "add", str(path), "--forge", str(forge_path))
    assert refused.returncode == 65 and "--replace" in refused.stderr
    replaced = run_assay("brief", "add", str(path), "--forge", str(forge_path), "--replace")
    assert replaced.returncode == 0, replaced.stderr
    shown = run_assay("brief", "show", "add-median", "--forge", str(forge_path), "--json")
    assert json.loads(shown.stdout)["brief"]["priority"] == 5


def test_add_refuses_a_brief_that_breaks_the_set_and_pushes_nothing(
    run_assay: AssayRunner, tmp_path: Path, forge_path: Path
) -> None:
    before = main_sha(forge_path)
    ghost = write_brief(tmp_path / "drafts", "needs-ghost", extra="depends_on: [ghost]\n")
    done = run_assay("brief", "add", str(ghost), "--forge", str(forge_path))
    assert done.returncode == 65
    assert "unknown brief 'ghost'" in done.stderr
    bad = write_brief(tmp_path / "drafts", "bad", extra="colour: red\n")
    done = run_assay("brief", "add", str(bad), "--forge", str(forge_path))
    assert done.returncode == 65 and "colour: unknown field" in done.stderr
    assert main_sha(forge_path) == before


def test_concurrent_adds_over_http_both_land(
    tmp_path: Path, http_forge: Served, forge_path: Path
) -> None:
    paths = [write_brief(tmp_path / "drafts", f"race-{n}") for n in range(4)]
    procs = [
        popen_assay(["brief", "add", str(p), "--forge", http_forge.url, "--json"], cwd=tmp_path)
        for p in paths
    ]
    for proc in procs:
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    on_main = {p for p in main_files(forge_path) if p.startswith("briefs/race-")}
    assert on_main == {f"briefs/race-{n}.md" for n in range(4)}


def test_list_on_an_empty_forge(run_assay: AssayRunner, forge_path: Path) -> None:
    done = run_assay("brief", "list", "--forge", str(forge_path), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["briefs"] == []
