"""A full state directory (the forge cache's disk) is ``NoSpace`` (69), never exit 70.

It used to be exit 70: ``OSError: [Errno 28]`` from the cache's object writer, and libgit2's
bare ``GitError`` from the objects a fetch stores. The full disk is real: a tmpfs mounted
for the test (CI runs as root), the forge's cache made on it while it had room, then filled.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import AssayRunner
from tests.forge_fixtures import put_on_main

BRIEF = "---\nid: {id}\ntitle: Brief {id}\n---\n{body}\n"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "state"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(mount: Path) -> None:
    with open(mount / "filler", "wb") as handle, contextlib.suppress(OSError):
        while True:
            handle.write(b"\0" * 65536)
            handle.flush()
            os.fsync(handle.fileno())


def _no_space(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 69, done.stdout + done.stderr
    error = json.loads(done.stdout)
    assert error["status"] == "unavailable" and "no space" in error["message"].lower(), error


def test_a_full_cache_disk_is_69_for_a_write_and_for_a_fetch(
    run_assay: AssayRunner, forge_path: Path, small_disk: Path, tmp_path: Path
) -> None:
    env = {"ASSAY_STATE": str(small_disk)}
    put_on_main(forge_path, {"briefs/one.md": BRIEF.format(id="one", body="One.")})
    listed = run_assay("brief", "list", "--forge", str(forge_path), "--json", env=env)
    assert listed.returncode == 0, listed.stdout + listed.stderr  # the cache, made with room
    fill(small_disk)
    new = tmp_path / "two.md"
    # Larger than what a full tmpfs still has in its last page: the object write fails.
    new.write_text(BRIEF.format(id="two", body=os.urandom(96 * 1024).hex()))
    _no_space(run_assay("brief", "add", str(new), "--forge", str(forge_path), "--json", env=env))
    # Main moved with objects the cache lacks: the fetch that stores them finds no room.
    put_on_main(
        forge_path, {"briefs/big.md": BRIEF.format(id="big", body=os.urandom(96 * 1024).hex())}
    )
    _no_space(run_assay("brief", "list", "--forge", str(forge_path), "--json", env=env))
