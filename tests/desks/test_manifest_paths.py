"""Every file a desk manifest names stays inside the desks directory.

``model.script: ../../../../etc/shadow`` used to be read, and the error message printed the
file's first line. Now a path that leaves the desks directory (``..``, absolute, or a
symlink pointing out) is refused with 65 naming the field, and no message quotes the file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import AssayRunner
from tests.forge_fixtures import put_on_main

SECRET = "root:$6$SECRETHASH:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n"
BRIEF = "---\nid: b1\ntitle: Brief b1\n---\nDo b1.\n"
MANIFEST = (
    "name: coder\nkind: agent\ntakes: {{ids: [b1]}}\ntools: [finish]\n"
    "model: {{adapter: scripted, script: {script}}}\n"
)


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink"])
def test_a_script_outside_the_desks_directory_is_refused_unread(
    run_assay: AssayRunner, forge_path: Path, tmp_path: Path, how: str
) -> None:
    secret = tmp_path / "shadow"
    secret.write_text(SECRET)
    desks = tmp_path / "work" / "desks"
    desks.mkdir(parents=True)
    script = {"dotdot": "../../shadow", "absolute": str(secret), "symlink": "scripts/s.yaml"}[how]
    if how == "symlink":
        (desks / "scripts").mkdir()
        (desks / "scripts" / "s.yaml").symlink_to(secret)
    (desks / "coder.yaml").write_text(MANIFEST.format(script=script))
    put_on_main(forge_path, {"briefs/b1.md": BRIEF})
    done = run_assay(
        "desk", "run", "coder", "--forge", str(forge_path), "--desks", str(desks), "--once"
    )
    assert done.returncode == 65, done.stdout + done.stderr
    assert "model.script" in done.stdout + done.stderr
    assert "SECRETHASH" not in done.stdout + done.stderr
    assert "daemon" not in done.stdout + done.stderr


def test_an_error_never_quotes_a_foreign_file_as_a_field_name(tmp_path: Path) -> None:
    from assay.errors import BadInput
    from assay.models.scripted import load_script

    secret = tmp_path / "shadow.yaml"
    secret.write_text(SECRET)
    with pytest.raises(BadInput) as raised:
        load_script(secret)
    assert "SECRETHASH" not in raised.value.message


@pytest.mark.parametrize("lease", ["99999999999999999999999", "1e23", "31d"])
def test_a_lease_past_the_bound_is_65_naming_the_field(
    run_assay: AssayRunner, forge_path: Path, tmp_path: Path, lease: str
) -> None:
    desks = tmp_path / "desks"
    (desks / "scripts").mkdir(parents=True)
    (desks / "scripts" / "s.yaml").write_text("responses: []\n")
    (desks / "coder.yaml").write_text(
        MANIFEST.format(script="scripts/s.yaml") + f"lease: {lease}\n"
    )
    put_on_main(forge_path, {"briefs/b1.md": BRIEF})
    done = run_assay(
        "desk", "run", "coder", "--forge", str(forge_path), "--desks", str(desks), "--once"
    )
    assert done.returncode == 65, done.stdout + done.stderr
    assert "lease" in done.stderr and "Traceback" not in done.stderr
