"""The forge server never sends a pack that leaves the client without an object it needs.

The fixture ``incomplete-pack-forge.tar.gz`` (shared/fixtures, beside the checkout) is a
forge whose branches ``assay/j-delseg`` and ``assay/j-edit`` grew from a common base, and
whose ``tamper delseg`` commit put the base's root tree back. The in-process fetch once left
out the base's ``briefs`` tree and its new blobs: a fresh ``git clone`` failed (128) and so
did a ``--no-tags`` fetch of both branches, while ``git upload-pack`` answered both.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from pathlib import Path

import pygit2
import pytest

from assay.forge import ForgeServer
from assay.forge.sendpack import pack_reachable
from tests.conftest import REPO_ROOT, AssayRunner

FIXTURE_NAME = "incomplete-pack-forge.tar.gz"
# shared/ sits beside the checkout (in CI, read-only); a worktree sits one level deeper.
FIXTURE = next(
    (
        found
        for root in REPO_ROOT.parents
        if (found := root / "shared" / "fixtures" / FIXTURE_NAME).is_file()
    ),
    REPO_ROOT.parent / "shared" / "fixtures" / FIXTURE_NAME,
)
DELSEG = "refs/heads/assay/j-delseg"
EDIT = "refs/heads/assay/j-edit"


def git(*args: str, cwd: Path | None = None, input: bytes | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, input=input, capture_output=True, check=False, timeout=60
    )
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr.decode()[-500:]}"
    return done.stdout.decode()


def objects(git_dir: Path) -> set[str]:
    """Every object ``git_dir`` holds, loose or packed."""
    listed = git("cat-file", "--batch-all-objects", "--batch-check=%(objectname)", cwd=git_dir)
    return set(listed.split())


def reachable(git_dir: Path, *tips: str) -> set[str]:
    """The objects ``git rev-list --objects`` walks from ``tips``."""
    listed = git("rev-list", "--objects", *tips, cwd=git_dir)
    return {line.split(" ")[0] for line in listed.splitlines() if line}


@pytest.fixture
def fixture_forge(tmp_path: Path) -> Path:
    """A private copy of the fixture's ``forge.git`` (the shared copy is read-only)."""
    if not FIXTURE.is_file():
        pytest.fail(f"the fixture {FIXTURE} is missing (shared/ sits beside the checkout)")
    tarball = tmp_path / FIXTURE.name
    shutil.copyfile(FIXTURE, tarball)
    with tarfile.open(tarball) as archive:
        archive.extractall(tmp_path / "unpacked", filter="data")
    return tmp_path / "unpacked" / "forge.git"


def test_the_pack_of_both_branches_holds_their_common_base(fixture_forge: Path) -> None:
    repo = pygit2.Repository(str(fixture_forge))
    tips = [str(repo.references[ref].target) for ref in (DELSEG, EDIT)]
    pack = pack_reachable(repo, tips, hidden=[])
    client = fixture_forge.parent / "client.git"
    git("init", "--bare", "-q", str(client))
    git("index-pack", "--stdin", "--strict", cwd=client, input=pack)
    assert objects(client) == reachable(fixture_forge, *tips)


def test_a_fresh_clone_and_a_no_tags_fetch_of_the_fixture_are_whole(
    fixture_forge: Path, tmp_path: Path
) -> None:
    with ForgeServer(fixture_forge) as server:
        clone = tmp_path / "clone"
        git("clone", "--quiet", "--mirror", server.url, str(clone))
        git("fsck", "--strict", "--no-dangling", cwd=clone)
        fetched = tmp_path / "fetched.git"
        git("init", "--bare", "-q", str(fetched))
        spec = [f"{DELSEG}:refs/a", f"{EDIT}:refs/b"]
        git("-c", "protocol.version=2", "fetch", "-q", "--no-tags", server.url, *spec, cwd=fetched)
        git("fsck", "--strict", "--no-dangling", cwd=fetched)
        assert server.started["fetched"] >= 1, "the fetch was not answered in process"
    want = [git("rev-parse", ref, cwd=fixture_forge).strip() for ref in (DELSEG, EDIT)]
    assert objects(fetched) == reachable(fixture_forge, *want)
    assert objects(clone) == reachable(fixture_forge, "--all")


def test_a_fresh_reader_of_the_fixture_reads_its_status(
    fixture_forge: Path, tmp_path: Path, run_assay: AssayRunner
) -> None:
    with ForgeServer(fixture_forge) as server:
        done = run_assay(
            "status", "--forge", server.url, env={"ASSAY_STATE": str(tmp_path / "fresh")}
        )
    assert done.returncode == 0, done.stderr[-1000:]


def test_a_chain_of_commits_sends_only_what_the_other_side_lacks(tmp_path: Path) -> None:
    """Three commits on a held base, each changing one file among many: the pack is what
    ``git rev-list --objects <tip> --not <base>`` lists, not the unchanged files again."""
    work = tmp_path / "work"
    git("init", "-q", str(work))
    env_git = ["-c", "user.name=t", "-c", "user.email=t@t"]
    for number in range(20):
        (work / "d" / f"f{number}.txt").parent.mkdir(exist_ok=True)
        (work / "d" / f"f{number}.txt").write_text(f"{number}\n")
    git("add", ".", cwd=work)
    git(*env_git, "commit", "-q", "-m", "base", cwd=work)
    base = git("rev-parse", "HEAD", cwd=work).strip()
    for number in range(3):
        (work / "d" / f"f{number}.txt").write_text(f"changed {number}\n")
        git(*env_git, "commit", "-q", "-am", f"c{number}", cwd=work)
    tip = git("rev-parse", "HEAD", cwd=work).strip()
    repo = pygit2.Repository(str(work))
    client = tmp_path / "client.git"
    git("init", "--bare", "-q", str(client))
    git("index-pack", "--stdin", cwd=client, input=pack_reachable(repo, [tip], hidden=[base]))
    assert objects(client) == reachable(work, tip, "--not", base)
