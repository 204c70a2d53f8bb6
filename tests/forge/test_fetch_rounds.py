"""A fetch into a crowded cache costs one or two ``upload-pack`` requests and is complete.

A cache that many ``Forge`` instances share holds every instance's private namespace, so
hundreds of ref tips. git's negotiator would offer all of them as ``have`` lines, 16, 32,
64… per request, each request one more ``upload-pack`` on a stateless smart-HTTP server.
Here the reading cache holds six namespaces of 40 records each (240 distinct tips), and
each fetch is counted by the server (``ForgeServer.started``) and checked complete.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.forge import Forge, ForgeServer
from assay.forge.base import negotiation_tips
from assay.plumbing import ASSAY_IDENTITY, RefUpdate

RECORDS = [f"refs/assay/claims/b{n:02d}" for n in range(40)]


class Writer:
    """A peer with its own cache that moves the forge's refs."""

    def __init__(self, forge: Forge) -> None:
        self.forge = forge
        self.tips: dict[str, str | None] = {}
        self.serial = 0

    def move(self, refs: list[str], *, parents_from: str | None = None) -> None:
        updates = []
        for ref in refs:
            self.serial += 1
            old = self.tips.get(ref)
            parents = [old] if old else ([parents_from] if parents_from else [])
            files = {"record.json": f'{{"n": {self.serial}}}\n'.encode()}
            sha = self.forge.commit(
                files, parents=parents, message=f"record {self.serial}", author=ASSAY_IDENTITY
            )
            updates.append(RefUpdate(ref, sha, expected=old))
            self.tips[ref] = sha
        assert self.forge.push(updates, atomic=False).ok


@pytest.fixture
def served(forge_path: Path) -> Iterator[ForgeServer]:
    with ForgeServer(forge_path) as server:
        yield server


@pytest.fixture
def writer(served: ForgeServer, tmp_path: Path) -> Iterator[Writer]:
    with Forge(served.url, cache_dir=tmp_path / "writer-cache") as forge:
        peer = Writer(forge)
        peer.tips["refs/heads/main"] = forge.fetch(["refs/heads/main"])["refs/heads/main"]
        yield peer


@pytest.fixture
def crowded(served: ForgeServer, writer: Writer, tmp_path: Path) -> Iterator[Path]:
    """A reading cache whose six live namespaces each saw a different version of 40 refs."""
    cache = tmp_path / "reader-cache"
    peers = []
    for _ in range(6):
        writer.move(RECORDS)
        peer = Forge(served.url, cache_dir=cache)
        assert len(peer.fetch("refs/assay/claims/")) == len(RECORDS)
        peers.append(peer)
    try:
        yield cache
    finally:
        for peer in peers:
            peer.close()


def _complete(cache: Path, tip: str) -> bool:
    """Whether every object reachable from ``tip`` is in the cache."""
    done = subprocess.run(
        ["git", f"--git-dir={cache}", "rev-list", "--objects", "--missing=print", tip],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return not any(line.startswith("?") for line in done.stdout.splitlines())


def test_a_ref_that_grew_from_a_tip_a_peer_saw_is_one_request(
    served: ForgeServer, writer: Writer, crowded: Path
) -> None:
    writer.move([RECORDS[7], RECORDS[30]])
    before = served.started["upload-pack"]
    with Forge(served.url, cache_dir=crowded) as reader:
        found = reader.fetch([RECORDS[7], RECORDS[30]])
    assert found == {ref: writer.tips[ref] for ref in (RECORDS[7], RECORDS[30])}
    assert served.started["upload-pack"] - before == 1
    assert all(_complete(crowded, sha) for sha in found.values())


def test_refs_no_cached_commit_reaches_are_two_requests_and_complete(
    served: ForgeServer, writer: Writer, crowded: Path
) -> None:
    main = writer.tips["refs/heads/main"]
    writer.move(["refs/assay/claims/new"])  # a root commit: no have reaches it
    writer.move(["refs/heads/assay/new"], parents_from=main)  # forks from main
    writer.move(["refs/heads/assay/new"])
    before = served.started["upload-pack"]
    with Forge(served.url, cache_dir=crowded) as reader:
        found = reader.refresh(["refs/assay/claims/new", "refs/heads/assay/new"])
    assert served.started["upload-pack"] - before <= 2
    assert set(found) == {"refs/assay/claims/new", "refs/heads/assay/new"}
    assert all(_complete(crowded, sha) for sha in found.values())


def test_a_cache_that_holds_none_of_the_refs_still_fetches_them_whole(
    served: ForgeServer, writer: Writer, tmp_path: Path
) -> None:
    writer.move(["refs/assay/claims/alone"])
    writer.move(["refs/assay/claims/alone"])
    with Forge(served.url, cache_dir=tmp_path / "empty-cache") as reader:
        tip = reader.fetch(["refs/assay/claims/alone"])["refs/assay/claims/alone"]
        assert tip == writer.tips["refs/assay/claims/alone"]
        assert len(reader.history(tip)) == 2
    assert _complete(tmp_path / "empty-cache", tip)


def test_a_long_list_of_refs_is_offered_by_folder_and_fetched_whole(
    served: ForgeServer, writer: Writer, crowded: Path
) -> None:
    tips = negotiation_tips([*RECORDS, "refs/heads/main"])
    assert len(tips) <= 3 and any(tip.endswith("/refs/assay/claims/*") for tip in tips)
    writer.move(RECORDS)
    before = served.started["upload-pack"]
    with Forge(served.url, cache_dir=crowded) as reader:
        found = reader.fetch(RECORDS)
    assert found == {ref: writer.tips[ref] for ref in RECORDS}
    assert served.started["upload-pack"] - before <= 2
    assert all(_complete(crowded, sha) for sha in found.values())
