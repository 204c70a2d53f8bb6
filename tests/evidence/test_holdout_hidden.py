"""Holdout content never reaches the desk's side, and the gate refuses a row that did.

A real desk run (a scripted agent desk through ``assay desk run`` on an embedded forge)
does its work on a brief with a holdout row whose file and command carry a canary; the
gate verifies and merges it. The canary is then searched for everywhere the desk's side
holds anything: its journal, every object on the forge (its checkpoints, the run ref),
its sandbox's work tree, its whole state folder, and what every process printed. It is in
none. And when the content does reach the desk (the author left a copy where the desk
works, or it is in the desk's journal), ``verify`` fails the holdout row, naming neither
the file nor its content.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from assay.journal import JournalWriter
from tests.conftest import AssayRunner, assay_argv
from tests.desks.world import World, brief_text, finish, write
from tests.evidence.gatekit import BRIEF, Scene
from tests.evidence.test_holdout import CANARY, COMMAND, GOOD, HIDDEN, _in_review
from tests.forge_fixtures import put_on_main

LEAKED = "holdout: its content is in the tree or journal the desk worked with: it was not hidden"


def _everywhere(root: Path) -> bytes:
    """Every byte of every file under ``root``, names included."""
    found = []
    for path in sorted(root.rglob("*")):
        found.append(str(path).encode())
        if path.is_file() and not path.is_symlink():
            found.append(path.read_bytes())
    return b"\n".join(found)


def _forge_objects(forge: Path) -> bytes:
    done = subprocess.run(
        ["git", "--git-dir", str(forge), "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        check=True,
    )
    return done.stdout


@pytest.mark.slow
def test_a_real_desk_run_never_holds_the_holdout_row_s_file_or_command(
    tmp_path: Path, forge_path: Path
) -> None:
    world = World(root=tmp_path / "world", forge_path=forge_path)
    gate = {"ASSAY_GATE_STATE": str(tmp_path / "gate-state")}
    verify_row = {"id": "unit", "run": "python3 check.py"}
    world.add_briefs(brief_text("b1", verify=[verify_row]))
    put = world.assay("forge", "gate-key", world.url, "--json", extra=gate)
    assert put.returncode == 0, put.stderr
    # the visible check and the wrong code, on main beside the brief
    check = "import calc\nassert calc.add(2, 2) == 4\n"
    put_on_main(forge_path, {"check.py": check, "calc.py": "def add(a, b):\n    return 0\n"})
    # The brief's author seals the row from a folder of their own: the file's path is
    # relative to it.
    author = tmp_path / "author"
    author.mkdir()
    (author / f"hidden_{CANARY}.py").write_text(HIDDEN)
    sealed = subprocess.run(
        assay_argv(
            "holdout", "add", "b1", "--id", "hidden", "--run", COMMAND,
            "--file", f"hidden_{CANARY}.py", "--forge", world.url,
        ),
        cwd=author,
        env=world.env("author", gate),
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert sealed.returncode == 0, sealed.stdout + sealed.stderr
    world.add_desk(
        "coder",
        [write("calc.py", "def add(a, b):\n    return a + b\n"), finish("added", unit="pass")],
    )
    ran = world.desk("coder", "--once", "--json")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    verified = world.assay("verify", "b1", "--forge", world.url, "--json", extra=gate)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    rows = {r["row"]: r for r in json.loads(verified.stdout)["decision"]["rows"]}
    assert rows["holdout:hidden"]["verdict"] == "pass"  # the gate did open and run it
    merged = world.assay("merge", "b1", "--forge", world.url, "--json", extra=gate)
    assert merged.returncode == 0, merged.stdout + merged.stderr

    desk_state = world.root / "machine-a"  # its forge cache, work trees, journal, logs
    printed = "".join(p.stdout + p.stderr for p in (put, sealed, ran, verified, merged))
    for needle in (CANARY, COMMAND):
        assert needle not in printed
        assert needle.encode() not in _everywhere(desk_state)
        assert needle.encode() not in _everywhere(world.desks)
        assert needle.encode() not in _forge_objects(forge_path)  # sealed on its ref
    journal = world.wal("a", "coder", "b1")
    assert journal and CANARY not in json.dumps(journal)


def _journal_note(scene: Scene, text: str) -> None:
    """A tool step in the desk's journal whose output holds ``text`` (as a JSON string)."""
    writer = JournalWriter.open(scene.desk / ".assay" / "journal" / BRIEF, run_id="run-1")
    try:
        packed, blobs = writer.pack({"stdout": text})
        step = {"kind": "step", "step": "tool", "name": "run", "status": "ok"}
        writer.append({**step, "out": packed, "blobs": blobs})
    finally:
        writer.close()


def test_a_holdout_row_whose_content_the_desk_holds_fails_naming_nothing_of_it(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    scene = _in_review(tmp_path, run_assay, GOOD)
    clean = scene.ref(f"refs/heads/assay/{BRIEF}")
    assert clean is not None
    # A copy in the tree the desk works in (CRLF line endings make no difference) ...
    copied = scene.desk_commit({"notes/seen.py": HIDDEN.replace("\n", "\r\n")}, message="copy")
    # ... and one only in the desk's journal, where a tool's output holds it as a string.
    (scene.desk / "notes" / "seen.py").unlink()
    _journal_note(scene, f"$ cat checks\n{HIDDEN}")
    journaled = scene.desk_commit({}, claims={"unit": "pass", "lint": "pass"}, message="log")
    for head, leaked in ((clean, False), (copied, True), (journaled, True)):
        done = run_assay("verify", BRIEF, "--sha", head, "--forge", str(scene.forge), "--json")
        report = json.loads(done.stdout)
        [record] = [r for r in report["ran"] if r["row"] == "holdout:hidden"]
        assert record["exit"] == 0, record  # the row itself passes: the desk saw its test
        assert (LEAKED in record.get("findings", [])) is leaked, (head, record)
        assert done.returncode == (1 if leaked else 0), done.stdout + done.stderr
        assert CANARY not in done.stdout + done.stderr and "seen.py" not in json.dumps(record)
