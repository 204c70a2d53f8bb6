"""Every pack the forge server sends is git's, object for object: a differential test.

Hypothesis builds a forge's history with plain git: two clones pushing, over the server, to
branches grown from common bases, with merges (conflicted ones committed as they stand),
deletes, moves of files and folders, a tree put back from another commit, annotated tags,
force-pushes over each other's work, branch deletes, and repacks (the forge's objects loose,
packed, or pruned). A reader fetches at some points along the way. Then the same fetches
are made from the server (``assay forge serve``'s, in this process) and from the bare
repository by git (``file://``, ``git upload-pack``): a mirror clone, ``--no-tags`` and
tag-following fetches of several branches into an empty repository and into the reader
(haves negotiated by git), and a one-request fetch (wants, haves, ``done``) posted to both.
Each client must pass ``git fsck --strict`` and hold exactly the objects git's twin holds.

Bounded and fixed: ``derandomize`` and no example database, so CI runs the same shapes.
"""

from __future__ import annotations

import http.client
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from assay.forge import ForgeServer, fetchpack, smarthttp
from assay.forge.embedded import init_forge

PATHS = ("a.txt", "d/b.txt", "d/e/c.txt", "f/b.txt", "f/e/c.txt")
CONTENTS = ("1\n", "2\n", "3\n")  # few contents, so blobs and trees recur across commits
MOVE_FROM = ("d", "f", "d/e", "a.txt", "d/b.txt", "f/e")
MOVE_TO = ("g", "f/e", "h/i", "d")
BRANCHES = ("main", "b1", "b2", "b3")
CLONES = 2

_ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_AUTHOR_DATE": "1700000000 +0000",
    "GIT_COMMITTER_DATE": "1700000000 +0000",
}


def run(*args: str, cwd: Path, check: bool = True, input: bytes | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=_ENV, input=input, capture_output=True, timeout=60
    )
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} in {cwd}: {done.stderr.decode()[-800:]}")
    return done.stdout.decode() if done.returncode == 0 else ""


def ok(*args: str, cwd: Path) -> bool:
    done = subprocess.run(["git", *args], cwd=cwd, env=_ENV, capture_output=True, timeout=60)
    return done.returncode == 0


def objects(git_dir: Path) -> set[str]:
    listed = run("cat-file", "--batch-all-objects", "--batch-check=%(objectname)", cwd=git_dir)
    return set(listed.split())


def fsck(git_dir: Path) -> None:
    run("fsck", "--strict", "--no-dangling", "--no-progress", cwd=git_dir)


# -------------------------------------------------------------------- the history


ops = st.one_of(
    st.tuples(
        st.just("write"),
        st.integers(0, CLONES - 1),
        st.sampled_from(BRANCHES),
        st.sampled_from(PATHS),
        st.sampled_from(CONTENTS),
    ),
    st.tuples(
        st.just("delete"),
        st.integers(0, CLONES - 1),
        st.sampled_from(BRANCHES),
        st.sampled_from((*PATHS, "d", "f")),
    ),
    st.tuples(
        st.just("move"),
        st.integers(0, CLONES - 1),
        st.sampled_from(BRANCHES),
        st.sampled_from(MOVE_FROM),
        st.sampled_from(MOVE_TO),
    ),
    st.tuples(
        st.just("merge"),
        st.integers(0, CLONES - 1),
        st.sampled_from(BRANCHES),
        st.sampled_from(BRANCHES),
    ),
    st.tuples(
        st.just("put back"),
        st.integers(0, CLONES - 1),
        st.sampled_from(BRANCHES),
        st.sampled_from(BRANCHES),
        st.integers(0, 3),
    ),
    st.tuples(
        st.just("branch"),
        st.integers(0, CLONES - 1),
        st.sampled_from(BRANCHES[1:]),
        st.sampled_from(BRANCHES),
    ),
    st.tuples(st.just("sync"), st.integers(0, CLONES - 1), st.sampled_from(BRANCHES)),
    st.tuples(st.just("tag"), st.integers(0, CLONES - 1), st.sampled_from(BRANCHES)),
    st.tuples(st.just("drop"), st.integers(0, CLONES - 1), st.sampled_from(BRANCHES[1:])),
    st.tuples(st.just("repack"), st.sampled_from(("repack -a -d", "gc --prune=now"))),
    st.tuples(
        st.just("read"),
    ),
)


@dataclass
class World:
    """The forge, its server, the pushing clones and the reader."""

    root: Path
    bare: Path
    server: ForgeServer
    clones: list[Path] = field(default_factory=list)
    reader: Path | None = None
    tags: int = 0

    @property
    def file_url(self) -> str:
        return f"file://{self.bare}"


def checkout(clone: Path, branch: str) -> bool:
    """Check ``branch`` out in ``clone``: its own, else the forge's as last fetched, else
    a new branch from ``main``. False when there is nothing to start from."""
    if run("rev-parse", "-q", "--verify", f"refs/heads/{branch}", cwd=clone, check=False):
        run("checkout", "-q", "-f", branch, cwd=clone)
        return True
    for start in (f"origin/{branch}", "main", "origin/main"):
        if run("rev-parse", "-q", "--verify", start, cwd=clone, check=False):
            run("checkout", "-q", "-f", "-B", branch, start, cwd=clone)
            return True
    return False


def commit_and_push(clone: Path, branch: str, message: str) -> None:
    run("add", "-A", cwd=clone)
    run("commit", "-q", "--allow-empty", "--no-verify", "-m", message, cwd=clone)
    run("push", "-q", "--force", "origin", f"{branch}:refs/heads/{branch}", cwd=clone)


def apply(world: World, op: tuple[object, ...]) -> None:
    kind = op[0]
    if kind == "repack":
        run(*str(op[1]).split(), "-q", cwd=world.bare)
        return
    if kind == "read":
        if world.reader is None:
            world.reader = world.root / "reader.git"
            run("init", "-q", "--bare", str(world.reader), cwd=world.root)
        run("fetch", "-q", world.file_url, "+refs/heads/*:refs/old/*", cwd=world.reader)
        return
    clone = world.clones[int(str(op[1]))]
    branch = str(op[2])
    if kind == "sync":
        run("fetch", "-q", "--prune", "origin", cwd=clone)
        if run("rev-parse", "-q", "--verify", f"origin/{branch}", cwd=clone, check=False):
            run("checkout", "-q", "-f", "-B", branch, f"origin/{branch}", cwd=clone)
        return
    if kind == "branch":
        start = str(op[3])
        if start != branch and ok("rev-parse", "-q", "--verify", start, cwd=clone):
            run("checkout", "-q", "-f", "-B", branch, start, cwd=clone)
            run("push", "-q", "--force", "origin", f"{branch}:refs/heads/{branch}", cwd=clone)
        return
    if kind == "drop":
        run("push", "-q", "origin", "--delete", branch, cwd=clone, check=False)
        run("checkout", "-q", "-f", "--detach", cwd=clone, check=False)
        run("branch", "-q", "-D", branch, cwd=clone, check=False)
        return
    if not checkout(clone, branch):
        return
    if kind == "write":
        target = clone / str(op[3])
        for folder in reversed(target.relative_to(clone).parents):
            if (clone / folder).is_file():
                (clone / folder).unlink()  # a file moved where a folder was
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_dir():
            shutil.rmtree(target)
        target.write_text(str(op[4]))
    elif kind == "delete":
        run("rm", "-r", "-q", "--ignore-unmatch", str(op[3]), cwd=clone)
    elif kind == "move":
        if (clone / str(op[3])).exists():
            (clone / str(op[4])).parent.mkdir(parents=True, exist_ok=True)
            run("mv", "-k", str(op[3]), str(op[4]), cwd=clone)
    elif kind == "merge":
        other = str(op[3])
        if other == branch or not run("rev-parse", "-q", "--verify", other, cwd=clone, check=False):
            return
        if not ok("merge", "-q", "--no-ff", "--no-edit", "-X", "theirs", other, cwd=clone):
            run("add", "-A", cwd=clone)  # a conflict is committed as it stands
            run("commit", "-q", "--no-verify", "--no-edit", cwd=clone, check=False)
        run("push", "-q", "--force", "origin", f"{branch}:refs/heads/{branch}", cwd=clone)
        return
    elif kind == "put back":
        source = f"{op[3]}~{op[4]}"
        if not run("rev-parse", "-q", "--verify", f"{source}^{{commit}}", cwd=clone, check=False):
            return
        run("read-tree", "-u", "--reset", source, cwd=clone)
    elif kind == "tag":
        world.tags += 1
        name = f"t{world.tags}"
        run("tag", "-a", "-m", name, name, cwd=clone)
        run("push", "-q", "origin", f"refs/tags/{name}", cwd=clone)
        return
    commit_and_push(clone, branch, f"{kind} {' '.join(map(str, op[2:]))}")


# -------------------------------------------------------------------- the fetches


def twins(world: World, name: str, start: Path | None) -> tuple[Path, Path]:
    """Two clients in the same state: empty, or copies of ``start``."""
    made = []
    for side in ("served", "git"):
        dest = world.root / f"{name}-{side}.git"
        if start is None:
            run("init", "-q", "--bare", str(dest), cwd=world.root)
        else:
            shutil.copytree(start, dest)
        made.append(dest)
    return made[0], made[1]


def same(served: Path, by_git: Path, what: str) -> None:
    fsck(served)
    ours, theirs = objects(served), objects(by_git)
    assert ours == theirs, (
        f"{what}: the server's client lacks {sorted(theirs - ours)[:5]}, "
        f"has besides {sorted(ours - theirs)[:5]}"
    )


def branch_tips(world: World) -> dict[str, str]:
    listed = run("for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/", cwd=world.bare)
    return {ref: oid for oid, ref in (line.split(" ") for line in listed.splitlines())}


def fetch_both(
    world: World, name: str, start: Path | None, args: list[str], refs: list[str]
) -> None:
    served, by_git = twins(world, name, start)
    spec = [f"+{ref}:refs/got/{ref.removeprefix('refs/heads/')}" for ref in refs]
    run("fetch", "-q", *args, world.server.url, *spec, cwd=served)
    run("fetch", "-q", *args, world.file_url, *spec, cwd=by_git)
    same(served, by_git, f"git fetch {' '.join(args)} {refs} into {start or 'nothing'}")


def post(server: ForgeServer, body: bytes) -> bytes:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=60)
    try:
        headers = {
            "Content-Type": "application/x-git-upload-pack-request",
            "Git-Protocol": "version=2",
        }
        conn.request("POST", f"/{server.name}/git-upload-pack", body=body, headers=headers)
        reply = conn.getresponse()
        assert reply.status == 200, reply.status
        return reply.read()
    finally:
        conn.close()


def one_request(world: World, start: Path | None, wants: list[str], haves: list[str]) -> None:
    """The same wants-haves-done request, answered by the server and by upload-pack, each
    pack indexed into its own copy of the client."""
    lines = [b"command=fetch\n", b"agent=t\n", b"object-format=sha1\n"]
    body = b"".join(smarthttp.pkt_line(line) for line in lines) + smarthttp.DELIM
    arguments = ["no-progress", "ofs-delta", *(f"want {w}" for w in wants)]
    arguments += [*(f"have {h}" for h in haves), "done"]
    body += b"".join(smarthttp.pkt_line(f"{a}\n".encode()) for a in arguments) + smarthttp.FLUSH
    by_git_answer = subprocess.run(
        ["git", "upload-pack", "--stateless-rpc", str(world.bare)],
        input=body,
        env={**_ENV, "GIT_PROTOCOL": "version=2"},
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    served, by_git = twins(world, f"request{len(wants)}-{len(haves)}", start)
    for client, answer in ((served, post(world.server, body)), (by_git, by_git_answer)):
        pack = fetchpack.pack_of(answer, "forge")
        run("index-pack", "--stdin", "--strict", cwd=client, input=pack)
        for at, want in enumerate(wants):
            run("update-ref", f"refs/got/{at}", want, cwd=client)
    same(served, by_git, f"one request: want {wants}, have {haves}")


def read_everything(world: World, pick: list[int]) -> None:
    tips = branch_tips(world)
    names = sorted(tips)
    chosen = sorted({names[i % len(names)] for i in pick}) or names[:1]
    mirror_served, mirror_git = world.root / "mirror-served.git", world.root / "mirror-git.git"
    run("clone", "-q", "--mirror", world.server.url, str(mirror_served), cwd=world.root)
    run("clone", "-q", "--mirror", world.file_url, str(mirror_git), cwd=world.root)
    same(mirror_served, mirror_git, "git clone --mirror")
    fetch_both(world, "no-tags", None, ["--no-tags"], chosen)
    fetch_both(world, "tags", None, [], chosen)
    one_request(world, None, [tips[ref] for ref in chosen], [])
    if world.reader is not None:
        fetch_both(world, "reader-no-tags", world.reader, ["--no-tags"], chosen)
        held = run("for-each-ref", "--format=%(objectname)", cwd=world.reader).split()
        one_request(world, world.reader, [tips[ref] for ref in chosen], sorted(set(held)))


@settings(
    max_examples=6,
    deadline=None,  # each example is dozens of git processes: bounded by max_examples
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
# The fixture's shape (incomplete-pack-forge): two branches from a base that added files,
# one of them putting the base's tree back after a commit of its own.
@example(
    history=[
        ("write", 0, "main", "d/b.txt", "2\n"),
        ("branch", 0, "b1", "main"),
        ("branch", 0, "b2", "main"),
        ("write", 0, "b1", "a.txt", "3\n"),
        ("write", 0, "b2", "f/b.txt", "3\n"),
        ("put back", 0, "b1", "b1", 1),
        ("write", 1, "main", "a.txt", "1\n"),
    ],
    pick=[0, 1],  # b1 and b2
)
@given(
    history=st.lists(ops, min_size=4, max_size=16),
    pick=st.lists(st.integers(0, 7), min_size=1, max_size=3),
)
@pytest.mark.slow
def test_every_pack_the_server_sends_is_gits(
    history: list[tuple[object, ...]], pick: list[int]
) -> None:
    with tempfile.TemporaryDirectory(prefix="assay-diff-") as tmp:
        root = Path(tmp)
        bare = init_forge(root / "forge.git")
        with ForgeServer(bare) as server:
            world = World(root=root, bare=bare, server=server)
            for number in range(CLONES):
                clone = root / f"clone{number}"
                run("clone", "-q", server.url, str(clone), cwd=root)
                world.clones.append(clone)
            for op in history:
                apply(world, op)
            answered_here = server.started["fetched"]
            read_everything(world, pick)
            # The comparison is not vacuous: the server answered some of them itself.
            assert server.started["fetched"] > answered_here
