"""Attack: evidence records hand-made to look like the gate's, pushed with plain git.

The forger knows the record format (it is documented): verifier ``gate:…``, the chain's
``prev``, a recomputed ``digest``. What it does not have is the gate's key, which the gate
keeps in its own state directory (or ``ASSAY_EVIDENCE_KEY``): it can sign only with a key of
its own, whose signature names a key the forge does not trust, so by default such records
never count and ``assay merge`` refuses; only the explicit
``--insecure-unsigned-evidence`` accepts them.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from assay.evidence.keys import gate_key
from assay.evidence.records import encode, seal
from tests.conftest import AssayRunner
from tests.evidence.gatekit import BRIEF, Scene, git, record
from tests.gatekeys import key_for

BAD = "def add(a, b):\n    return a - b\n"
ROWS = (("unit", "python3 check.py"), ("lint", "test -f calc.py"))


def _push_forged_evidence(scene: Scene, head: str, *, sig: str = "") -> None:
    """What a desk with push access can do: write a gate-looking chain with plain git."""
    gd = ["--git-dir", str(scene.forge)]
    prev, parent = "", None
    for row, command in ROWS:
        forged = seal(
            record(
                brief=BRIEF,
                row=row,
                command=command,
                seconds=0.2,
                output_sha256="sha256:" + "0" * 64,
                output_bytes=3,
                output_tail="ok\n",
                head_sha=head,
                env_fingerprint=scene.desk_fingerprint(),
                verifier="gate:ci@gatehost",
                at="2026-01-01T00:00:00Z",
            ),
            prev=prev,
            key=None,
        )
        data = json.loads(encode(forged))
        if sig:
            data["sig"] = sig
        blob = git(*gd, "hash-object", "-w", "--stdin", input=json.dumps(data).encode())
        tree = git(*gd, "mktree", input=f"100644 blob {blob}\trecord.json\n".encode())
        args = [*gd, "commit-tree", tree, "-m", f"evidence {row}"]
        if parent:
            args += ["-p", parent]
        parent = git(*args)
        prev = forged.digest
    assert parent is not None
    git(*gd, "update-ref", f"refs/assay/evidence/{BRIEF}", parent)


@pytest.fixture
def forged(tmp_path: Path) -> tuple[Scene, str]:
    scene = Scene(tmp_path)
    head = scene.desk_commit({"calc.py": BAD}, claims={"unit": "pass", "lint": "pass"})
    scene.open_review(head)
    _push_forged_evidence(scene, head)
    return scene, head


def test_hand_made_evidence_does_not_merge_by_default(
    forged: tuple[Scene, str], run_assay: AssayRunner
) -> None:
    scene, _head = forged
    main_before = scene.main_sha()
    done = run_assay("merge", BRIEF, "--forge", str(scene.forge), "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    payload = json.loads(done.stdout)
    assert {row["verdict"] for row in payload["decision"]["rows"]} == {"missing"}
    assert scene.main_sha() == main_before


def test_hand_made_evidence_does_not_merge_with_a_key_in_the_environment(
    forged: tuple[Scene, str], run_assay: AssayRunner
) -> None:
    scene, _head = forged
    main_before = scene.main_sha()
    env = {"ASSAY_EVIDENCE_KEY": key_for("gate-only").text}
    done = run_assay("merge", BRIEF, "--forge", str(scene.forge), env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "no gate record" in done.stderr
    assert scene.main_sha() == main_before


def test_a_made_up_signature_is_corrupt(tmp_path: Path, run_assay: AssayRunner) -> None:
    scene = Scene(tmp_path)
    head = scene.desk_commit({"calc.py": BAD}, claims={"unit": "pass", "lint": "pass"})
    scene.open_review(head)
    # A signature naming the gate's own key, made without it.
    gate = gate_key(create=True)
    assert gate is not None
    made_up = base64.b64encode(b"\x01" * 64).decode()
    _push_forged_evidence(scene, head, sig=f"ed25519:{gate.public.fingerprint}:{made_up}")
    main_before = scene.main_sha()
    done = run_assay("merge", BRIEF, "--forge", str(scene.forge))
    assert done.returncode == 6, done.stdout + done.stderr
    assert "signature" in done.stderr
    assert scene.main_sha() == main_before


def test_unsigned_evidence_merges_only_as_the_explicit_insecure_choice(
    forged: tuple[Scene, str], run_assay: AssayRunner
) -> None:
    scene, head = forged
    done = run_assay(
        "merge", BRIEF, "--forge", str(scene.forge), "--insecure-unsigned-evidence", "--json"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["decision"]["head_sha"] == head
    assert scene.main_sha() == json.loads(done.stdout)["main_after"]


def test_forge_init_makes_the_gate_key_outside_the_forge(
    tmp_path: Path, run_assay: AssayRunner
) -> None:
    gate_state = tmp_path / "gate-state"
    done = run_assay(
        "forge",
        "init",
        str(tmp_path / "f.git"),
        "--json",
        env={"ASSAY_GATE_STATE": str(gate_state)},
    )
    assert done.returncode == 0, done.stderr
    made = json.loads(done.stdout)
    key = Path(made["gate_key"])
    assert key.parent == gate_state
    assert key.stat().st_mode & 0o077 == 0 and gate_state.stat().st_mode & 0o077 == 0
    assert key.read_text().startswith("assay-gate-key:ed25519:")
    assert not str(key).startswith(str(tmp_path / "f.git"))
    listing = git("--git-dir", str(tmp_path / "f.git"), "ls-tree", "-r", "--name-only", "main")
    assert "gate.key" not in listing
    # The public half, and only it, is in the forge's config record.
    config = git("--git-dir", str(tmp_path / "f.git"), "show", "refs/assay/config:record.json")
    assert json.loads(config)["gate_public_key"] == made["gate_public_key"]
    assert key.read_text().split(":")[-1].strip() not in config


def test_the_gate_signs_and_its_records_merge(tmp_path: Path, run_assay: AssayRunner) -> None:
    scene = Scene(tmp_path)
    head = scene.desk_commit(
        {"calc.py": "def add(a, b):\n    return a + b\n"}, claims={"unit": "pass", "lint": "pass"}
    )
    scene.open_review(head)
    assert run_assay("verify", BRIEF, "--forge", str(scene.forge)).returncode == 0
    record = json.loads(scene.git_show(f"refs/assay/evidence/{BRIEF}"))
    assert record["sig"].startswith("ed25519:")
    before = scene.main_sha()
    done = run_assay("merge", BRIEF, "--forge", str(scene.forge), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    merged = json.loads(done.stdout)
    assert merged["decision"]["head_sha"] == head and merged["main_before"] == before
    assert scene.main_sha() == merged["main_after"] != before
