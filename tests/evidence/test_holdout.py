"""Holdout rows: a desk that overfits the visible test is caught by a row it never saw.

The brief's author seals a row (a command and a file) to the gate's holdout key with
``assay holdout add``; the gate opens it in its clean tree after the public rows ran, and
its evidence record, the review and the merge rule carry only its id, a digest and its
verdict. A canary in the holdout file and in its command is searched for everywhere a desk
or a reader could look: the forge's objects, the desk's tree and journal, every output.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from assay.errors import Corrupt
from assay.evidence.holdout import HoldoutPublicKey, add_row, open_rows, read_rows
from assay.forge import open_forge
from assay.plumbing import Identity
from tests.conftest import AssayRunner
from tests.evidence.gatekit import BRIEF, BRIEF_TEXT, Scene, git
from tests.gatekeys import key_for

CANARY = "canary-holdout-5e1f0c9a"
HIDDEN = f"import calc\nassert calc.add(3, 5) == 8, 'add is wrong'\nprint('{CANARY}')\n"
COMMAND = f"python3 hidden_{CANARY}.py"
# Passes the visible test (add(2, 2) == 4) and nothing else.
OVERFIT = "def add(a, b):\n    return 4 if (a, b) == (2, 2) else 0\n"
GOOD = "def add(a, b):\n    return a + b\n"


# The same check as a pytest test: the gate reads pytest's own report of a holdout row.
HIDDEN_TEST = f"import calc\n\n\ndef test_add_{CANARY.replace('-', '_')}():\n"
HIDDEN_TEST += "    assert calc.add(3, 5) == 8\n"
PYTEST_COMMAND = f"{sys.executable} -m pytest -q -p no:cacheprovider test_hidden_{CANARY}.py"
# Hostile desks the exit code alone would pass: code that ends any run it does not know
# with exit 0, and a branch conftest.py that mends ``add`` only under pytest.
EXITS_UNLESS_VISIBLE = (
    "import os\nimport sys\n\nif not sys.argv[0].endswith('check.py'):\n    os._exit(0)\n" + OVERFIT
)
MENDING_CONFTEST = "import calc\n\ncalc.add = lambda a, b: a + b\n"


def _author(
    tmp_path: Path,
    scene: Scene,
    run_assay: AssayRunner,
    *,
    file: tuple[str, str] = (f"hidden_{CANARY}.py", HIDDEN),
    command: str = COMMAND,
) -> None:
    """The brief's author: record the gate's keys, then seal one holdout row."""
    recorded = run_assay("forge", "gate-key", str(scene.forge), "--json")
    assert recorded.returncode == 0, recorded.stderr
    desk_files = tmp_path / "author-files"
    desk_files.mkdir()
    (desk_files / file[0]).write_text(file[1])
    added = run_assay(
        "holdout", "add", BRIEF, "--id", "hidden", "--run", command,
        "--file", file[0], "--forge", str(scene.forge), "--json",
        cwd=desk_files,
    )  # fmt: skip
    assert added.returncode == 0, added.stdout + added.stderr
    assert json.loads(added.stdout)["rows"] == ["hidden"]


def _in_review(
    tmp_path: Path,
    run_assay: AssayRunner,
    calc: str | dict[str, str],
    *,
    brief_text: str = BRIEF_TEXT,
    **author: Any,
) -> Scene:
    """A brief with a holdout row, and a desk's ``calc.py`` in review, every row claimed
    (``author``: the holdout row, as ``_author`` takes it; ``calc`` may be a dict of files)."""
    scene = Scene(tmp_path, brief_text=brief_text)
    _author(tmp_path, scene, run_assay, **author)
    files = calc if isinstance(calc, dict) else {"calc.py": calc}
    head = scene.desk_commit(files, claims={"unit": "pass", "lint": "pass"})
    scene.open_review(head)
    return scene


def _everything_on_the_forge(forge: Path) -> bytes:
    """Every object the forge holds, inflated: what any reader could fetch."""
    done = subprocess.run(
        ["git", "--git-dir", str(forge), "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        check=True,
    )
    return done.stdout


def _tree_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


def test_an_overfitted_desk_passes_its_visible_row_and_fails_the_holdout(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    scene = _in_review(tmp_path, run_assay, OVERFIT)
    listed = run_assay("holdout", "list", BRIEF, "--forge", str(scene.forge))
    assert listed.returncode == 0 and listed.stdout.split() == ["hidden"]
    verified = run_assay("verify", BRIEF, "--forge", str(scene.forge), "--json")
    assert verified.returncode == 1, verified.stdout + verified.stderr
    rows = {row["row"]: row for row in json.loads(verified.stdout)["decision"]["rows"]}
    assert rows["unit"]["verdict"] == "pass"  # the visible test is fooled
    assert rows["holdout:hidden"]["verdict"] == "failing"
    before = scene.main_sha()
    merged = run_assay("merge", BRIEF, "--forge", str(scene.forge), "--json")
    assert merged.returncode == 1, merged.stdout + merged.stderr
    assert scene.main_sha() == before
    assert "holdout: 0 of 1 pass" in scene.review()["body"]
    status = run_assay("status", "--forge", str(scene.forge), "--json")
    assert status.returncode == 0, status.stderr
    assert "holdout 0/1" in status.stdout  # the board's evidence column says it too
    outputs = listed.stdout + verified.stdout + verified.stderr + merged.stdout + merged.stderr
    outputs += status.stdout
    # The canary is nowhere: not on the forge (sealed), the desk's tree, its journal, or
    # any output; the command is not either.
    for needle in (CANARY, COMMAND):
        assert needle not in outputs
        assert needle.encode() not in _everything_on_the_forge(scene.forge)
        assert needle.encode() not in _tree_bytes(scene.desk)


def test_a_working_desk_merges_with_the_holdout_passing(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    scene = _in_review(tmp_path, run_assay, GOOD)
    verified = run_assay("verify", BRIEF, "--forge", str(scene.forge), "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    [record] = [r for r in json.loads(verified.stdout)["ran"] if r["row"] == "holdout:hidden"]
    assert record["output_tail"] == "" and record["command"].startswith("holdout ")
    merged = run_assay("merge", BRIEF, "--forge", str(scene.forge), "--json")
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert "holdout: 1 of 1 pass" in scene.review()["body"]
    # The squash holds the desk's code, never the holdout file.
    listing = git("--git-dir", str(scene.forge), "ls-tree", "-r", "--name-only", "main")
    assert f"hidden_{CANARY}.py" not in listing


def test_a_holdout_row_the_brief_requires_refuses_the_merge_once_its_ref_is_gone(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    # On GitHub custom refs are unprotected: a desk job can delete (or roll back) the holdout
    # ref, and a gate that finds no holdout row would judge the visible rows alone. A brief
    # that names its holdout rows is refused while one of them is missing.
    requiring = BRIEF_TEXT.replace("---\n", "---\nholdout: [hidden]\n", 1)
    scene = _in_review(tmp_path, run_assay, GOOD, brief_text=requiring)
    verified = run_assay("verify", BRIEF, "--forge", str(scene.forge), "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    git("--git-dir", str(scene.forge), "update-ref", "-d", f"refs/assay/holdout/{BRIEF}")
    before = scene.main_sha()
    merged = run_assay("merge", BRIEF, "--forge", str(scene.forge), "--json")
    assert merged.returncode == 1, merged.stdout + merged.stderr
    assert "holdout row 'hidden', which the brief requires, is not on" in merged.stdout
    assert scene.main_sha() == before
    again = run_assay("verify", BRIEF, "--forge", str(scene.forge), "--json")
    assert again.returncode == 1, again.stdout + again.stderr
    assert json.loads(again.stdout)["decision"]["problems"] == [
        f"holdout row 'hidden', which the brief requires, is not on refs/assay/holdout/{BRIEF}: "
        "deleted, rolled back or never sealed (`assay holdout add`)"
    ]


@pytest.mark.parametrize(
    ("desk", "exit"),
    [
        ({"calc.py": GOOD}, 0),
        ({"calc.py": EXITS_UNLESS_VISIBLE}, 0),
        ({"calc.py": OVERFIT, "conftest.py": MENDING_CONFTEST}, 1),
    ],
    ids=["working", "exits-unless-visible", "branch-conftest-mends"],
)
def test_a_pytest_holdout_row_is_judged_by_pytests_report_in_a_pinned_tree(
    tmp_path: Path, run_assay: AssayRunner, desk: dict[str, str], exit: int
) -> None:
    scene = _in_review(
        tmp_path, run_assay, desk,
        file=(f"test_hidden_{CANARY}.py", HIDDEN_TEST), command=PYTEST_COMMAND,
    )  # fmt: skip
    verified = run_assay("verify", BRIEF, "--forge", str(scene.forge), "--json")
    report = json.loads(verified.stdout)
    rows = {row["row"]: row for row in report["decision"]["rows"]}
    [record] = [r for r in report["ran"] if r["row"] == "holdout:hidden"]
    assert rows["unit"]["verdict"] == "pass"  # the visible check is fooled by every desk
    # The desk that exits early exits 0 (the exit code alone would pass it): pytest's
    # report fails it. The mending conftest.py would have made the row pass, exit 0 and
    # report included: the tree is pinned for the holdout row too, so it is gone and the
    # hidden test fails.
    assert record["exit"] == exit, record
    if desk["calc.py"] == GOOD:
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert rows["holdout:hidden"]["verdict"] == "pass" and record.get("findings", []) == []
    else:
        assert verified.returncode == 1, verified.stdout + verified.stderr
        assert rows["holdout:hidden"]["verdict"] == "failing"
        # The runner's findings name the hidden test: only their count leaves the gate.
        findings = ["holdout: 1 finding(s) from the runner"] if exit == 0 else []
        assert record.get("findings", []) == findings
    assert record.get("runner", "") == "" and record["output_tail"] == ""
    for needle in (CANARY, CANARY.replace("-", "_"), PYTEST_COMMAND):
        assert needle not in verified.stdout + verified.stderr
        assert needle.encode() not in _everything_on_the_forge(scene.forge)


def test_a_changed_holdout_row_makes_its_old_evidence_stale(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    scene = _in_review(tmp_path, run_assay, GOOD)
    assert run_assay("verify", BRIEF, "--forge", str(scene.forge)).returncode == 0
    again = run_assay(
        "holdout", "add", BRIEF, "--id", "hidden", "--run", "false", "--forge", str(scene.forge)
    )
    assert again.returncode == 0, again.stderr
    refused = run_assay("merge", BRIEF, "--forge", str(scene.forge), "--json")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    rows = {row["row"]: row for row in json.loads(refused.stdout)["decision"]["rows"]}
    assert rows["holdout:hidden"]["verdict"] == "stale"


def test_sealed_rows_open_only_for_their_gate_brief_and_row(tmp_path: Path) -> None:
    scene = Scene(tmp_path)
    gate, other = key_for("gate"), key_for("other")
    author = Identity(name="author", email="a@example.invalid")
    with open_forge(str(scene.forge)) as forge:
        add_row(
            forge, BRIEF, "hidden", command="true", files={"t.py": b"x"},
            public=HoldoutPublicKey.of(gate), author=author,
        )  # fmt: skip
        [row] = read_rows(forge, BRIEF)
    [opened] = open_rows(gate, [row], brief=BRIEF)
    assert opened.command == "true" and opened.files == {"t.py": b"x"}
    with pytest.raises(Corrupt, match="does not open"):
        open_rows(other, [row], brief=BRIEF)
    with pytest.raises(Corrupt, match="does not open"):
        open_rows(gate, [row], brief="another-brief")  # moved to another brief
    renamed = type(row)("renamed", row.sealed)
    with pytest.raises(Corrupt, match="does not open"):
        open_rows(gate, [renamed], brief=BRIEF)
    edited = type(row)("hidden", {**row.sealed, "ct": row.sealed["ct"][:-4] + "AAAA"})
    with pytest.raises(Corrupt):
        open_rows(gate, [edited], brief=BRIEF)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--id", "../x", "--run", "true"], "--id"),
        (["--id", "h", "--run", " "], "--run"),
        (["--id", "h", "--run", "true", "--file", "/etc/hostname"], "--file"),
        (["--id", "h", "--run", "true", "--file", "missing.py"], "--file"),
    ],
)
def test_bad_holdout_input_is_bad_input_naming_it(
    tmp_path: Path, run_assay: AssayRunner, args: list[str], message: str
) -> None:
    scene = Scene(tmp_path)
    assert run_assay("forge", "gate-key", str(scene.forge)).returncode == 0
    done = run_assay("holdout", "add", BRIEF, *args, "--forge", str(scene.forge))
    assert done.returncode == 65, done.stdout + done.stderr
    assert message in done.stderr
    assert scene.ref(f"refs/assay/holdout/{BRIEF}") is None


def test_without_a_recorded_key_holdout_add_says_how_to_get_one(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    scene = Scene(tmp_path)
    done = run_assay(
        "holdout", "add", BRIEF, "--id", "h", "--run", "true", "--forge", str(scene.forge)
    )
    assert done.returncode == 65 and "assay forge gate-key" in done.stderr
