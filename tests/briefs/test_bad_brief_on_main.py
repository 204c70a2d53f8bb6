"""A malformed brief committed straight to main is reported for itself, not for all.

``brief list`` used to fail for every brief because of one; now it lists the good ones,
names the bad file and its field, and exits 65. A desk never takes the bad brief and
still takes the good one.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import AssayRunner
from tests.forge_fixtures import put_on_main

GOOD = "---\nid: good\ntitle: A good brief\n---\nDo it.\n"
BAD = (
    "---\nid: bad\ntitle: A bad brief\n"
    'verify:\n  - id: unit\n    run: "true"\n    timeout: 1e99\n---\n'
)


def test_brief_list_names_the_bad_brief_and_lists_the_rest(
    run_assay: AssayRunner, forge_path: Path
) -> None:
    put_on_main(forge_path, {"briefs/good.md": GOOD, "briefs/bad.md": BAD})
    done = run_assay("brief", "list", "--forge", str(forge_path), "--json")
    assert done.returncode == 65, done.stdout + done.stderr
    payload = json.loads(done.stdout)
    assert [b["id"] for b in payload["briefs"]] == ["good"]
    (invalid,) = payload["invalid"]
    assert invalid["source"] == "briefs/bad.md" and "timeout" in invalid["message"]
    table = run_assay("brief", "list", "--forge", str(forge_path))
    assert table.returncode == 65
    assert "good" in table.stdout and "briefs/bad.md" in table.stderr


def test_status_names_the_bad_brief_and_a_desk_takes_only_the_good_one(
    run_assay: AssayRunner, forge_path: Path, tmp_path: Path
) -> None:
    put_on_main(forge_path, {"briefs/good.md": GOOD, "briefs/bad.md": BAD})
    status = run_assay("status", "--forge", str(forge_path), "--json")
    assert status.returncode == 0, status.stderr
    rows = {row["id"]: row for row in json.loads(status.stdout)["briefs"]}
    assert "timeout" in rows["bad"]["status_note"] and rows["good"]["status_note"] == ""
    desks = tmp_path / "desks"
    desks.mkdir()
    (desks / "runner.yaml").write_text(
        "name: runner\nkind: command\ntakes: {globs: ['*']}\ncommand: [\"true\"]\n"
    )
    ran = run_assay(
        "desk", "run", "runner", "--forge", str(forge_path), "--desks", str(desks), "--json"
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert [r["brief"] for r in json.loads(ran.stdout)["runs"]] == ["good"]


def test_brief_show_of_a_good_brief_ignores_a_bad_one_and_names_the_bad_one(
    run_assay: AssayRunner, forge_path: Path
) -> None:
    put_on_main(forge_path, {"briefs/good.md": GOOD, "briefs/bad.md": BAD})
    shown = run_assay("brief", "show", "good", "--forge", str(forge_path), "--json")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert json.loads(shown.stdout)["brief"]["title"] == "A good brief"
    text = run_assay("brief", "show", "good", "--forge", str(forge_path))
    assert text.returncode == 0 and "A good brief" in text.stdout
    bad = run_assay("brief", "show", "bad", "--forge", str(forge_path))
    assert bad.returncode == 65
    assert "briefs/bad.md" in bad.stderr and "timeout" in bad.stderr
    missing = run_assay("brief", "show", "other", "--forge", str(forge_path))
    assert missing.returncode == 65 and "no brief 'other'" in missing.stderr


def test_a_bad_manifest_stops_only_its_own_desk(
    run_assay: AssayRunner, forge_path: Path, tmp_path: Path
) -> None:
    put_on_main(forge_path, {"briefs/good.md": GOOD})
    desks = tmp_path / "desks"
    desks.mkdir()
    (desks / "runner.yaml").write_text(
        "name: runner\nkind: command\ntakes: {globs: ['*']}\ncommand: [\"true\"]\n"
    )
    (desks / "broken.yaml").write_text(
        "name: broken\nkind: command\ntakes: {globs: ['*']}\ncommand: [\"true\"]\nbudget: 7\n"
    )
    broken = run_assay(
        "desk", "run", "broken", "--forge", str(forge_path), "--desks", str(desks), "--once"
    )
    assert broken.returncode == 65, broken.stdout + broken.stderr
    assert "broken.yaml" in broken.stderr and "budget" in broken.stderr
    ran = run_assay(
        "desk", "run", "runner", "--forge", str(forge_path), "--desks", str(desks), "--json"
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert [r["brief"] for r in json.loads(ran.stdout)["runs"]] == ["good"]
    assert "broken.yaml" in ran.stderr and "left out" in ran.stderr
