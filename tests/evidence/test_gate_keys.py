"""Attacks on the gate's key pair: only the gate's private key signs, anyone checks.

The forge records the gate's public key (``refs/assay/config``, written by its admin); the
private key lives in the gate's own state directory, apart from the desks' state. A desk
that signs its own evidence, a second gate made by mistake, and a desk's user reading the
key in a two-user deployment are each refused, and say which keys are involved.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from assay.evidence.keys import read_key_file
from assay.evidence.records import encode, seal
from assay.forge import open_forge
from assay.forge.settings import read_settings, record_gate_key
from tests.conftest import REPO_ROOT, AssayRunner
from tests.evidence.gatekit import BRIEF, Scene, git, record
from tests.gatekeys import key_for
from tests.sandbox.test_unprivileged_desk import _traversable

GOOD = "def add(a, b):\n    return a + b\n"


def _gate(root: Path, name: str) -> dict[str, str]:
    """The environment of a gate whose state directory is ``root/name``."""
    return {"ASSAY_GATE_STATE": str(root / name)}


def _trusting(scene: Scene, run_assay: AssayRunner, gate: dict[str, str]) -> str:
    """Record ``gate``'s public key in the scene's forge, as `assay forge init` does."""
    done = run_assay("forge", "gate-key", str(scene.forge), "--json", env=gate)
    assert done.returncode == 0, done.stdout + done.stderr
    return str(json.loads(done.stdout)["fingerprint"])


def _ready(tmp_path: Path) -> tuple[Scene, str]:
    scene = Scene(tmp_path)
    head = scene.desk_commit({"calc.py": GOOD}, claims={"unit": "pass", "lint": "pass"})
    scene.open_review(head)
    return scene, head


def test_evidence_signed_with_a_desks_own_key_pair_does_not_merge(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    scene, head = _ready(tmp_path)
    _trusting(scene, run_assay, _gate(tmp_path, "gate"))
    desk_key = key_for("the desk's own")
    gd = ["--git-dir", str(scene.forge)]
    prev, parent = "", None
    for row, command in (("unit", "python3 check.py"), ("lint", "test -f calc.py")):
        forged = seal(
            record(brief=BRIEF, row=row, command=command, head_sha=head, verifier="gate:ci"),
            prev=prev,
            key=desk_key,  # a real Ed25519 signature, by a key the forge does not trust
        )
        blob = git(*gd, "hash-object", "-w", "--stdin", input=encode(forged))
        tree = git(*gd, "mktree", input=f"100644 blob {blob}\trecord.json\n".encode())
        parent = git(*gd, "commit-tree", tree, "-m", row, *(["-p", parent] if parent else []))
        prev = forged.digest
    assert parent is not None
    git(*gd, "update-ref", f"refs/assay/evidence/{BRIEF}", parent)
    before = scene.main_sha()
    # Even the gate's own merge, holding the private key, counts none of them.
    done = run_assay(
        "merge", BRIEF, "--forge", str(scene.forge), "--json", env=_gate(tmp_path, "gate")
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert {r["verdict"] for r in json.loads(done.stdout)["decision"]["rows"]} == {"missing"}
    assert scene.main_sha() == before


def test_a_gate_with_another_key_refuses_to_sign_and_names_both(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    scene, _head = _ready(tmp_path)
    trusted = _trusting(scene, run_assay, _gate(tmp_path, "gate"))
    stray = _gate(tmp_path, "another-state")
    done = run_assay("verify", BRIEF, "--forge", str(scene.forge), env=stray)
    assert done.returncode == 77, done.stdout + done.stderr
    made = read_key_file(tmp_path / "another-state").public.fingerprint
    assert trusted in done.stderr and made in done.stderr and trusted != made
    assert scene.ref(f"refs/assay/evidence/{BRIEF}") is None  # nothing signed


def test_a_second_key_on_a_forge_that_records_none_refuses_to_sign_over_the_first(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    # A forge from before the key pair: no key recorded. The first gate's records name its
    # key, and a gate run by mistake with another state directory refuses to add its own.
    scene, _head = _ready(tmp_path)
    first = _gate(tmp_path, "gate")
    assert run_assay("verify", BRIEF, "--forge", str(scene.forge), env=first).returncode == 0
    tip = scene.ref(f"refs/assay/evidence/{BRIEF}")
    done = run_assay("verify", BRIEF, "--forge", str(scene.forge), env=_gate(tmp_path, "other"))
    assert done.returncode == 77, done.stdout + done.stderr
    fingerprints = [read_key_file(tmp_path / n).public.fingerprint for n in ("gate", "other")]
    assert all(fp in done.stderr for fp in fingerprints)
    assert scene.ref(f"refs/assay/evidence/{BRIEF}") == tip
    # The way back: the first gate goes on, and its merge counts its records.
    assert run_assay("verify", BRIEF, "--forge", str(scene.forge), env=first).returncode == 0
    assert run_assay("merge", BRIEF, "--forge", str(scene.forge), env=first).returncode == 0


def test_a_merge_needs_only_the_public_key_the_forge_records(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    scene, head = _ready(tmp_path)
    gate = _gate(tmp_path, "gate")
    _trusting(scene, run_assay, gate)
    assert run_assay("verify", BRIEF, "--forge", str(scene.forge), env=gate).returncode == 0
    keyless = _gate(tmp_path, "no-key-here")
    done = run_assay("merge", BRIEF, "--forge", str(scene.forge), "--json", env=keyless)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["decision"]["head_sha"] == head
    assert not (tmp_path / "no-key-here").exists()  # no key was made to check signatures
    # The board, with no key at all, checks the signatures too.
    board = run_assay("status", "--forge", str(scene.forge), "--json", env=keyless)
    assert board.returncode == 0, board.stdout + board.stderr


def test_gate_key_records_once_and_replaces_only_when_told(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    forge = tmp_path / "f.git"
    made = run_assay("forge", "init", str(forge), "--json", env=_gate(tmp_path, "a"))
    assert made.returncode == 0, made.stderr
    first = json.loads(made.stdout)["gate_key_fingerprint"]
    again = run_assay("forge", "gate-key", str(forge), "--json", env=_gate(tmp_path, "a"))
    assert again.returncode == 0 and json.loads(again.stdout)["fingerprint"] == first
    other = run_assay("forge", "gate-key", str(forge), env=_gate(tmp_path, "b"))
    assert other.returncode == 77, other.stdout + other.stderr
    second = read_key_file(tmp_path / "b").public
    assert first in other.stderr and second.fingerprint in other.stderr
    replaced = run_assay("forge", "gate-key", str(forge), "--replace", env=_gate(tmp_path, "b"))
    assert replaced.returncode == 0, replaced.stderr
    assert replaced.stdout.strip() == second.text  # the public key, never the private one
    with open_forge(str(forge)) as handle:
        assert read_settings(handle).gate_public_key == second


def test_a_malformed_config_record_is_corrupt_naming_the_ref(tmp_path: Path) -> None:
    scene = Scene(tmp_path)
    gd = ["--git-dir", str(scene.forge)]
    blob = git(
        *gd,
        "hash-object",
        "-w",
        "--stdin",
        input=b'{"v": 1, "kind": "forge-config", "gate_public_key": "ed25519:not-a-key"}',
    )
    tree = git(*gd, "mktree", input=f"100644 blob {blob}\trecord.json\n".encode())
    git(*gd, "update-ref", "refs/assay/config", git(*gd, "commit-tree", tree, "-m", "bad"))
    with open_forge(str(scene.forge)) as forge:
        from assay.errors import Corrupt

        with pytest.raises(Corrupt, match="refs/assay/config"):
            read_settings(forge)
        with pytest.raises(Corrupt, match="refs/assay/config"):
            record_gate_key(forge, key_for("x").public)


def test_rows_learn_neither_where_the_gate_key_nor_where_the_desks_state_lives(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    probe = (
        "---\nid: calc\ntitle: Probe\nverify:\n"
        "  - id: unit\n"
        "    run: sh -c 'test -z \"$ASSAY_GATE_STATE$ASSAY_STATE$ASSAY_EVIDENCE_KEY\"'\n"
        "---\nProbe the row's environment.\n"
    )
    scene = Scene(tmp_path, brief_text=probe)
    head = scene.desk_commit({"calc.py": GOOD}, claims={"unit": "pass"})
    scene.open_review(head)
    env = {**_gate(tmp_path, "gate"), "ASSAY_EVIDENCE_KEY": key_for("gate").text}
    done = run_assay("verify", BRIEF, "--forge", str(scene.forge), "--json", env=env)
    [row] = json.loads(done.stdout)["ran"]
    assert row["exit"] == 0, done.stdout + done.stderr  # all three were empty for the row
    assert key_for("gate").text not in done.stdout + done.stderr


def _system_python() -> str:
    found = shutil.which("python3", path="/usr/bin")
    assert found, "the system python3 runs the desk's user"
    return found


def test_the_desks_user_cannot_read_or_replace_the_gates_key() -> None:
    # The two-user deployment: the gate's state belongs to the gate's user (here root), the
    # desks run as another (nobody). The desks' user can neither read the key nor make one
    # in its place; it is told why, and nothing is written.
    import pydantic

    site = str(Path(pydantic.__file__).resolve().parent.parent)
    root = Path(tempfile.mkdtemp(prefix="assay-two-users-"))
    try:
        os.chmod(root, 0o755)
        gate_state = root / "gate-state"
        made = subprocess.run(
            [_system_python(), "-m", "assay", "forge", "gate-key", "--json"],
            env={
                "PATH": "/usr/bin:/bin",
                "PYTHONPATH": f"{REPO_ROOT}:{site}",
                "ASSAY_GATE_STATE": str(gate_state),
                "HOME": str(root),
            },
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert made.returncode == 0, made.stderr
        assert gate_state.stat().st_mode & 0o777 == 0o700
        key_file = gate_state / "gate.key"
        before = key_file.read_bytes()
        runuser = shutil.which("runuser") or "/usr/sbin/runuser"
        with _traversable(REPO_ROOT, Path(site)):
            as_desk = subprocess.run(
                [
                    runuser,
                    "-u",
                    "nobody",
                    "--",
                    _system_python(),
                    "-m",
                    "assay",
                    "forge",
                    "gate-key",
                    "--json",
                ],
                env={
                    "PATH": "/usr/bin:/bin",
                    "PYTHONPATH": f"{REPO_ROOT}:{site}",
                    "ASSAY_GATE_STATE": str(gate_state),
                    "HOME": str(root),
                    "NO_COLOR": "1",
                },
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        assert as_desk.returncode == 69, as_desk.stdout + as_desk.stderr
        assert str(gate_state) in as_desk.stdout + as_desk.stderr
        assert key_file.read_bytes() == before
        assert before.decode().strip() not in as_desk.stdout + as_desk.stderr
    finally:
        shutil.rmtree(root, ignore_errors=True)
