"""A full disk in the work or state directory is 69, and the next desk resumes at once.

It used to be exit 70 with the claim left held, so the brief waited out its lease. Now the
desk maps "no space left on device" to ``Unavailable`` (69) and releases the claim with a
note, and another desk with room takes the brief right away and finishes it.

The full disk is real: a tmpfs of 1 MiB mounted for the test (CI runs as root) and filled
up before the desk starts.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.desks.world import World, brief_text, finish, write


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "full"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], check=True)
    try:
        with open(mount / "filler", "wb") as handle, contextlib.suppress(OSError):
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
                os.fsync(handle.fileno())
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.parametrize("where", ["work", "state"])
def test_a_full_disk_is_69_and_releases_the_claim(
    world: World, full_disk: Path, where: str
) -> None:
    world.add_briefs(brief_text("b1"))
    world.add_desk("coder", [write("hello.txt", "hi\n"), finish("done")])
    args = list(world.desk_args("coder", "--once"))
    extra = {"ASSAY_STATE": str(full_disk)} if where == "state" else {}
    if where == "work":
        args += ["--workdir", str(full_disk / "work")]
    done = world.assay(*args, "--json", extra=extra)
    assert done.returncode == 69, done.stdout + done.stderr
    assert "no space" in (done.stdout + done.stderr).lower()
    claim = world.claim("b1")
    assert claim is None or claim.state in ("released", "stuck"), claim
    # Another machine with room takes it now, not after the lease.
    again = world.desk("coder", "--once", "--json", machine="b")
    assert again.returncode == 0, again.stdout + again.stderr
    assert [r["brief"] for r in json.loads(again.stdout)["runs"]] == ["b1"]
