"""Holdout rows on GitHub, where any job may delete or roll back ``refs/assay/holdout/*``.

The author seals a row with ``assay holdout add`` (a person's token, the gate's holdout
public key passed in, since the settings record is desk-writable here); ``holdout list``
shows ids only; the gate opens and runs it. A desk job deletes the holdout ref before the
first verify: the brief names the row (``holdout add`` refuses to seal one it does not, on
a forge with unprotected refs), so the gate refuses rather than pass without it. Through
the CLI against the fake GitHub, each command on a fresh runner.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from assay.errors import BadInput
from assay.evidence.holdout import HoldoutPublicKey
from tests.conftest import assay_argv, assay_env
from tests.github.test_gate_check import GATE, Scene, desk_push, in_review, refused

BRIEF_FILE = """---
id: tidy
title: Tidy up
verify:
  - id: unit
    run: test -e ok
holdout: [hidden]
---
Leave a file called ok.
"""
CANARY = "holdout-canary-7f3e"


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    with in_review(tmp_path_factory.mktemp("holdout"), {"briefs/tidy.md": BRIEF_FILE}) as made:
        yield made


def author(scene: Scene, *args: str) -> subprocess.CompletedProcess[str]:
    """``assay holdout ...`` as the brief's author: a maintainer's token, on their machine."""
    checks = scene.root / "checks"
    checks.mkdir(exist_ok=True)
    (checks / "hidden_check.sh").write_text(f"# {CANARY}\ntest -s ok\n")
    env = {
        "GITHUB_API_URL": scene.fake.api_url,
        "GITHUB_TOKEN": "ghp-maintainer",
        "ASSAY_FORGE": f"github:{scene.fake.slug}",
        "ASSAY_STATE": str(scene.root / "author-state"),
        "ASSAY_GATE_HOLDOUT_KEY": HoldoutPublicKey.of(GATE).text,
        "ASSAY_GITHUB_WRITE_SPACING": "0",
    }
    return subprocess.run(
        assay_argv("holdout", *args),
        cwd=checks,
        env=assay_env(env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_row_the_brief_does_not_name_is_not_sealed(scene: Scene) -> None:
    done = author(scene, "add", "tidy", "--id", "other", "--run", "true")
    assert done.returncode == BadInput.code, done.stdout + done.stderr
    assert "holdout: [other]" in done.stderr
    assert scene.fake.ref("refs/assay/holdout/tidy") is None


def test_a_sealed_row_is_listed_by_id_and_a_deleted_ref_refuses_the_merge(scene: Scene) -> None:
    added = author(
        scene,
        "add",
        "tidy",
        "--id",
        "hidden",
        "--run",
        "sh hidden_check.sh",
        "--file",
        "hidden_check.sh",
        "--json",
    )
    assert added.returncode == 0, added.stdout + added.stderr
    listed = author(scene, "list", "tidy", "--json")
    assert json.loads(listed.stdout)["rows"] == ["hidden"]
    assert CANARY not in listed.stdout
    sealed = scene.fake.ref("refs/assay/holdout/tidy")
    assert sealed is not None

    # A desk job deletes the ref before the gate's first verify.
    desk_push(scene, "refs/assay/holdout/tidy", None)
    verified = scene.verify()
    assert verified["passed"] is False
    refused(scene, "holdout row 'hidden'", "refs/assay/holdout/tidy")

    # Back: the gate opens the row, runs it, and the merge goes through.
    desk_push(scene, "refs/assay/holdout/tidy", sealed)
    verified = scene.verify()
    assert verified["passed"] is True, verified
    rows = {row["row"]: row["verdict"] for row in verified["decision"]["rows"]}
    assert rows == {"unit": "pass", "holdout:hidden": "pass"}, rows
    assert CANARY not in json.dumps(verified)
    merged = scene.merge()
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert scene.fake.pulls[scene.pull]["merged"] is True
