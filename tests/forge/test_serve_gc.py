"""The served forge's garbage collection: not after every push, but every ``gc_every``.

``receive-pack`` would start ``git gc --auto`` after each push; the server turns that off
for the pushes it serves (any forge, whatever its config says) and runs ``git gc --auto``
itself in the background every ``gc_every`` accepted pushes. The forge here is set so that
git's own rule finds work at once: ``gc.auto=1`` (more than one loose object in
``objects/17/`` is too many) and ``gc.autoDetach=false`` (a gc that runs finishes before
its caller goes on), and each push brings blobs whose ids start with ``17``.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from assay.errors import BadInput
from assay.forge import Forge, ForgeServer
from tests.forge_fixtures import put_on_main, wait_until


def _blobs_under_17(count: int, tag: str) -> dict[str, bytes]:
    """``count`` files whose blob ids start with ``17`` (found by trying contents)."""
    files: dict[str, bytes] = {}
    n = 0
    while len(files) < count:
        data = f"{tag} {n}\n".encode()
        if hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest().startswith("17"):
            files[f"briefs/{tag}-{len(files)}.md"] = data
        n += 1
    return files


def _loose_under_17(forge: Path) -> int:
    folder = forge / "objects" / "17"
    return len(list(folder.iterdir())) if folder.is_dir() else 0


def _configure(forge: Path) -> None:
    for key, value in (("gc.auto", "1"), ("gc.autoDetach", "false")):
        subprocess.run(["git", "config", key, value], cwd=forge, check=True, timeout=60)


def test_a_served_push_leaves_its_loose_objects_to_the_servers_gc(forge_path: Path) -> None:
    _configure(forge_path)
    with ForgeServer(forge_path, gc_every=1000) as server:
        put_on_main(server.url, _blobs_under_17(3, "a"))
        put_on_main(server.url, _blobs_under_17(3, "b"))
        assert _loose_under_17(forge_path) >= 6  # the push started no gc
        assert server.started["gc"] == 0
        # taken in process (assay.forge.receivepack) or by receive-pack
        assert server.started["received"] + server.started["receive-pack"] == 2


def test_the_server_packs_loose_objects_every_gc_every_pushes(
    forge_path: Path, tmp_path: Path
) -> None:
    _configure(forge_path)
    with ForgeServer(forge_path, gc_every=3) as server:
        for tag in ("a", "b"):
            put_on_main(server.url, _blobs_under_17(3, tag))
        assert _loose_under_17(forge_path) >= 6 and server.started["gc"] == 0
        put_on_main(server.url, _blobs_under_17(3, "c"))
        wait_until(lambda: _loose_under_17(forge_path) == 0, what="loose objects packed")
        assert server.started["gc"] == 1
        assert list((forge_path / "objects" / "pack").glob("*.pack"))
        # What was packed is whole: a fresh cache fetches main with every file.
        with Forge(server.url, cache_dir=tmp_path / "fresh-cache") as reader:
            main = reader.fetch(["refs/heads/main"])["refs/heads/main"]
            names = reader.list_tree(main, "briefs")
        assert {f"briefs/{tag}-{i}.md" for tag in "abc" for i in range(3)} <= set(names)


def test_a_local_push_taken_in_process_still_runs_gits_gc_when_due(forge_path: Path) -> None:
    """No receive-pack runs after a local push taken in process, so the pusher makes git's
    own first test itself and runs ``git gc --auto`` when it says so."""
    _configure(forge_path)
    put_on_main(forge_path, _blobs_under_17(1, "a"))
    assert _loose_under_17(forge_path) == 1  # one is not more than gc.auto=1 allows
    put_on_main(forge_path, _blobs_under_17(3, "b"))
    assert _loose_under_17(forge_path) == 0
    assert list((forge_path / "objects" / "pack").glob("*.pack"))
    subprocess.run(["git", "config", "receive.autogc", "false"], cwd=forge_path, check=True)
    put_on_main(forge_path, _blobs_under_17(3, "c"))
    assert _loose_under_17(forge_path) == 3  # receive.autogc=false: as git, no gc


def test_a_gc_interval_below_one_is_bad_input(forge_path: Path) -> None:
    with pytest.raises(BadInput, match="gc_every"):
        ForgeServer(forge_path, gc_every=0)
