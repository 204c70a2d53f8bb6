"""The forge server's in-process receive (``assay.forge.receivepack``) against git's own.

- A plain push taken in process answers the bytes ``git receive-pack --stateless-rpc``
  answers and leaves the same refs, and a served step starts no git process.
- A push that would need git's judgement is not taken here, and git then refuses it: a
  parent commit or a tree the forge holds but no ref reaches (planted, incomplete), a
  non-commit for a branch, a lock another writer holds, a name that clashes with a packed
  ref, a forge with an ``update`` hook or ``fsckObjects``.
- ``post-receive`` runs after the refs moved, with git's stdin and ``GIT_DIR``, and its
  output reaches the pusher as receive-pack's would.
- The server SIGKILLed at random instants while it takes pushes leaves every ref at a
  whole pushed commit, and a restarted server takes the next push.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pygit2
import pytest

from assay.forge import ForgeServer, receivepack, sendpack, smarthttp
from assay.forge.embedded import init_forge
from assay.odb import read_ref
from assay.plumbing import RefUpdate
from tests.conftest import REPO_ROOT

MAIN = "refs/heads/main"
SIG = pygit2.Signature("t", "t@t", 0, 0)


def git(*args: str, cwd: Path | None = None, input: bytes | None = None) -> bytes:
    return subprocess.run(
        ["git", *args], cwd=cwd, input=input, capture_output=True, check=True
    ).stdout


def _forge(root: Path, name: str = "forge.git") -> tuple[Path, pygit2.Repository]:
    """An embedded forge, and a work repository that borrows its objects."""
    forge = init_forge(root / name)
    work = pygit2.init_repository(str(root / f"{name}-work"), bare=True)
    (Path(work.path) / "objects" / "info" / "alternates").write_text(f"{forge}/objects\n")
    return forge, pygit2.Repository(work.path)


def _commit(work: pygit2.Repository, parent: str, files: dict[str, bytes]) -> str:
    """A commit on ``parent`` that adds ``files`` (paths one folder deep at most)."""
    base = work[parent].peel(pygit2.Commit).tree
    builder = work.TreeBuilder(base)
    folders: dict[str, pygit2.TreeBuilder] = {}
    for path, data in files.items():
        folder, _, name = path.rpartition("/")
        if not folder:
            builder.insert(name, work.create_blob(data), pygit2.GIT_FILEMODE_BLOB)
            continue
        if folder not in folders:
            existing = [entry for entry in base if entry.name == folder]
            folders[folder] = work.TreeBuilder(*[work[e.id] for e in existing])
        folders[folder].insert(name, work.create_blob(data), pygit2.GIT_FILEMODE_BLOB)
    for folder, sub in folders.items():
        builder.insert(folder, sub.write(), pygit2.GIT_FILEMODE_TREE)
    tree = builder.write()
    return str(work.create_commit(None, SIG, SIG, "c\n", tree, [pygit2.Oid(hex=parent)]))


def _body(work: pygit2.Repository, updates: list[RefUpdate], *, atomic: bool = True) -> bytes:
    moved = [str(u.new) for u in updates if u.new != u.expected]
    known = [str(u.expected) for u in updates if u.expected]
    pack = sendpack.build_pack(Path(work.path), moved, hidden=known)
    return sendpack.commands(updates, atomic=atomic) + pack


def _git_answer(forge: Path, body: bytes) -> bytes:
    return subprocess.run(
        ["git", "receive-pack", "--stateless-rpc", str(forge)],
        input=body,
        capture_output=True,
        check=True,
    ).stdout


def _in_process(forge: Path, body: bytes) -> receivepack.Received | None:
    request = smarthttp.parse_push(body[: smarthttp.MAX_PUSH_HEAD])
    assert request is not None
    assert receivepack.takes_pushes(forge, pygit2.Config(str(forge / "config")))
    return receivepack.receive(forge, pygit2.Repository(str(forge)), request, body)


def _refs(forge: Path) -> str:
    return git(f"--git-dir={forge}", "for-each-ref", "--format=%(objectname) %(refname)").decode()


def _post(url: str, body: bytes) -> bytes:
    reply = httpx.post(
        f"{url}/git-receive-pack",
        content=body,
        headers={"Content-Type": "application/x-git-receive-pack-request"},
        timeout=60,
    )
    assert reply.status_code == 200, reply.text
    return reply.content


# ---------------------------------------------------------------------------- as git does


@pytest.mark.parametrize("shape", ["step", "atomic-create"])
def test_the_answer_and_the_refs_are_receive_packs_own(tmp_path: Path, shape: str) -> None:
    forge, work = _forge(tmp_path)
    main = read_ref(forge, MAIN)
    assert main is not None
    tip = _commit(work, main, {"briefs/a.md": b"a\n", "top.txt": b"t\n"})
    if shape == "step":
        updates = [RefUpdate(MAIN, tip, expected=main)]
    else:
        updates = [RefUpdate(f"refs/assay/{n}", tip, expected=None) for n in ("x", "y/z")]
    body = _body(work, updates)
    twin = tmp_path / "twin.git"
    shutil.copytree(forge, twin)

    received = _in_process(forge, body)
    assert received is not None
    assert received.answer + smarthttp.FLUSH == _git_answer(twin, body)
    assert _refs(forge) == _refs(twin)
    git(f"--git-dir={forge}", "fsck", "--strict", "--no-dangling")


@pytest.mark.parametrize("race", ["update", "atomic", "create"])
def test_a_push_that_lost_at_the_lock_hears_receive_packs_refusal(
    tmp_path: Path, race: str
) -> None:
    """The losers of a race, found stale under the locks, are answered here (a local
    forge's 16 contenders start no git) in git's words: a moved branch, and a claim
    another desk created first."""
    forge, work = _forge(tmp_path)
    main = read_ref(forge, MAIN)
    assert main is not None
    theirs = _commit(work, main, {"theirs": b"t"})
    ours = _commit(work, main, {"ours": b"o"})
    ref = MAIN if race != "create" else "refs/assay/claims/b1"
    won = _in_process(
        forge, _body(work, [RefUpdate(ref, theirs, expected=main if race != "create" else None)])
    )
    assert won is not None and won.updated
    updates = [RefUpdate(ref, ours, expected=main if race != "create" else None)]
    if race == "atomic":
        updates.append(RefUpdate("refs/assay/claims/b1", ours, expected=None))
    body = _body(work, updates, atomic=race == "atomic")
    twin = tmp_path / "twin.git"
    shutil.copytree(forge, twin)
    received = _in_process(forge, body)
    assert received is not None and received.updated == ()
    assert received.answer == _git_answer(twin, body)
    assert _refs(forge) == _refs(twin)
    assert not list(forge.glob("refs/**/*.lock"))


def test_a_served_step_starts_no_git_process(tmp_path: Path) -> None:
    forge, work = _forge(tmp_path)
    main = read_ref(forge, MAIN)
    assert main is not None
    first = _commit(work, main, {"briefs/a.md": b"a\n"})
    second = _commit(work, first, {"briefs/b.md": b"b\n"})
    with ForgeServer(forge) as server:
        for old, new in ((main, first), (first, second)):
            answer = _post(server.url, _body(work, [RefUpdate(MAIN, new, expected=old)]))
            assert b"ok refs/heads/main" in answer
        assert dict(server.started) == {"received": 2}
    assert read_ref(forge, MAIN) == second
    git(f"--git-dir={forge}", "fsck", "--strict", "--no-dangling")


# ---------------------------------------------------------------------------- hostile


def _write_raw(repo: pygit2.Repository, kind: int, data: bytes) -> str:
    return str(repo.odb.write(kind, data))


def _planted_commit(forge: Path) -> str:
    """A commit in the forge's objects (and the work repository's) that no ref reaches and
    whose tree is missing: what a half-migrated push could leave."""
    missing_tree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"[:-4] + "beef"
    data = f"tree {missing_tree}\nauthor t <t@t> 0 +0000\ncommitter t <t@t> 0 +0000\n\np\n"
    return _write_raw(pygit2.Repository(str(forge)), pygit2.GIT_OBJECT_COMMIT, data.encode())


def _hand_made(work: pygit2.Repository, objects: list[pygit2.Oid], update: RefUpdate) -> bytes:
    """A push of exactly ``objects`` (no rule of sendpack's choosing them) for ``update``."""
    return sendpack.commands([update], atomic=True) + sendpack.write_pack(work, objects)


def _refused_everywhere(forge: Path, body: bytes, ref: str) -> None:
    """Not taken in process, and git, taking it instead over HTTP, leaves ``ref`` as it was."""
    before = read_ref(forge, ref)
    assert _in_process(forge, body) is None
    assert read_ref(forge, ref) == before
    with ForgeServer(forge) as server:
        answer = _post(server.url, body)
        assert server.started["received"] == 0 and server.started["receive-pack"] == 1
    assert f"ok {ref}\n".encode() not in answer
    assert read_ref(forge, ref) == before


def test_a_parent_no_ref_reaches_is_left_to_git(tmp_path: Path) -> None:
    forge, work = _forge(tmp_path)
    planted = _planted_commit(forge)
    tree = work.TreeBuilder().write()
    child = str(work.create_commit(None, SIG, SIG, "c\n", tree, [pygit2.Oid(hex=planted)]))
    update = RefUpdate("refs/heads/evil", child, expected=None)
    _refused_everywhere(forge, _hand_made(work, [pygit2.Oid(hex=child), tree], update), update.ref)


def test_a_tree_no_ref_reaches_is_left_to_git(tmp_path: Path) -> None:
    forge, work = _forge(tmp_path)
    main = read_ref(forge, MAIN)
    assert main is not None
    # A tree in the forge that names a blob nobody has.
    hollow = b"100644 x\0" + bytes.fromhex("ab" * 20)
    planted = _write_raw(pygit2.Repository(str(forge)), pygit2.GIT_OBJECT_TREE, hollow)
    builder = work.TreeBuilder(work[main].peel(pygit2.Commit).tree)
    builder.insert("hollow", pygit2.Oid(hex=planted), pygit2.GIT_FILEMODE_TREE)
    root = builder.write()
    child = str(work.create_commit(None, SIG, SIG, "c\n", root, [pygit2.Oid(hex=main)]))
    update = RefUpdate(MAIN, child, expected=main)
    _refused_everywhere(forge, _hand_made(work, [pygit2.Oid(hex=child), root], update), MAIN)


@pytest.mark.parametrize("confusion", ["tree-entry", "commit-tree"])
def test_a_blob_named_as_a_tree_is_left_to_git(tmp_path: Path, confusion: str) -> None:
    """An object of one kind named as another (a tree entry, or a commit's tree, naming a
    blob): rev-list would fail on it, so git must judge it."""
    forge, work = _forge(tmp_path)
    main = read_ref(forge, MAIN)
    assert main is not None
    blob = work.create_blob(b"a blob\n")
    if confusion == "tree-entry":
        root_raw = work[main].peel(pygit2.Commit).tree.read_raw()
        tree = pygit2.Oid(
            hex=_write_raw(work, pygit2.GIT_OBJECT_TREE, root_raw + b"40000 x\0" + blob.raw)
        )
        objects = [tree, blob]
    else:
        tree, objects = blob, [blob]
    data = f"tree {tree}\nparent {main}\nauthor t <t@t> 0 +0000\ncommitter t <t@t> 0 +0000\n\nc\n"
    child = pygit2.Oid(hex=_write_raw(work, pygit2.GIT_OBJECT_COMMIT, data.encode()))
    update = RefUpdate(MAIN, str(child), expected=main)
    _refused_everywhere(forge, _hand_made(work, [child, *objects], update), MAIN)


def test_a_blob_for_a_branch_is_left_to_git(tmp_path: Path) -> None:
    forge, work = _forge(tmp_path)
    blob = work.create_blob(b"not a commit\n")
    update = RefUpdate("refs/heads/blob", str(blob), expected=None)
    _refused_everywhere(forge, _hand_made(work, [blob], update), update.ref)


def test_a_lock_another_writer_holds_is_not_taken(tmp_path: Path) -> None:
    forge, work = _forge(tmp_path)
    main = read_ref(forge, MAIN)
    assert main is not None
    body = _body(work, [RefUpdate(MAIN, _commit(work, main, {"a": b"a"}), expected=main)])
    lock = forge / f"{MAIN}.lock"
    lock.write_text(main + "\n")
    assert _in_process(forge, body) is None
    assert lock.read_text() == main + "\n"  # another writer's lock is not ours to remove
    assert read_ref(forge, MAIN) == main


def test_a_name_that_clashes_with_a_packed_ref_is_left_to_git(tmp_path: Path) -> None:
    forge, work = _forge(tmp_path)
    main = read_ref(forge, MAIN)
    assert main is not None
    git(f"--git-dir={forge}", "pack-refs", "--all", "--prune")
    assert not (forge / MAIN).exists()
    tip = _commit(work, main, {"a": b"a"})
    # An update of the packed ref itself is taken, and git reads it afterwards.
    assert _in_process(forge, _body(work, [RefUpdate(MAIN, tip, expected=main)])) is not None
    assert git(f"--git-dir={forge}", "rev-parse", MAIN).decode().strip() == tip
    git(f"--git-dir={forge}", "pack-refs", "--all", "--prune")
    body = _body(work, [RefUpdate(f"{MAIN}/under", tip, expected=None)])
    _refused_everywhere(forge, body, f"{MAIN}/under")
    assert read_ref(forge, MAIN) == tip


@pytest.mark.parametrize("rule", ["update-hook", "fsck", "reflog", "hooks-path"])
def test_a_forge_that_acts_on_pushes_is_left_to_git(tmp_path: Path, rule: str) -> None:
    forge, _ = _forge(tmp_path)
    if rule == "update-hook":
        hook = forge / "hooks" / "update"
        hook.write_text("#!/bin/sh\nexit 1\n")
        hook.chmod(0o755)
    else:
        key, value = {
            "fsck": ("receive.fsckObjects", "true"),
            "reflog": ("core.logAllRefUpdates", "true"),
            "hooks-path": ("core.hooksPath", "/elsewhere"),
        }[rule]
        git(f"--git-dir={forge}", "config", key, value)
    assert not receivepack.takes_pushes(forge, pygit2.Config(str(forge / "config")))


def test_an_update_hook_still_refuses_a_served_push(tmp_path: Path) -> None:
    forge, work = _forge(tmp_path)
    hook = forge / "hooks" / "update"
    hook.write_text("#!/bin/sh\necho refused by policy >&2\nexit 1\n")
    hook.chmod(0o755)
    main = read_ref(forge, MAIN)
    assert main is not None
    body = _body(work, [RefUpdate(MAIN, _commit(work, main, {"a": b"a"}), expected=main)])
    with ForgeServer(forge) as server:
        answer = _post(server.url, body)
        assert server.started["receive-pack"] == 1 and server.started["received"] == 0
    assert b"refused by policy" in answer and read_ref(forge, MAIN) == main


# ---------------------------------------------------------------------------- post-receive


def test_post_receive_runs_as_receive_pack_runs_it(tmp_path: Path) -> None:
    forge, work = _forge(tmp_path)
    hook = forge / "hooks" / "post-receive"
    hook.write_text(
        '#!/bin/sh\ncat > "$GIT_DIR/heard"\necho "dir=$GIT_DIR" >> heard\n'
        'git rev-parse refs/heads/main >> heard\necho "hello from the hook"\n'
    )
    hook.chmod(0o755)
    main = read_ref(forge, MAIN)
    assert main is not None
    tip = _commit(work, main, {"a": b"a"})
    body = _body(work, [RefUpdate(MAIN, tip, expected=main)])
    twin = tmp_path / "twin.git"
    shutil.copytree(forge, twin)
    expected = _git_answer(twin, body)
    with ForgeServer(forge) as server:
        answer = _post(server.url, body)
        assert dict(server.started) == {"received": 1}
    assert answer == expected and b"hello from the hook" in answer
    heard = (forge / "heard").read_text()
    assert heard == (twin / "heard").read_text() == f"{main} {tip} {MAIN}\ndir=.\n{tip}\n"


# ---------------------------------------------------------------------------- killed


_PUSHER = """
import sys
import httpx
from pathlib import Path
body_dir, url = Path(sys.argv[1]), sys.argv[2]
for body in sorted(body_dir.iterdir()):
    reply = httpx.post(url + "/git-receive-pack", content=body.read_bytes(),
        headers={"Content-Type": "application/x-git-receive-pack-request"}, timeout=60)
    print(body.name, reply.status_code, b"ok refs/heads/main" in reply.content, flush=True)
"""


def _serve(forge: Path, port: int) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "assay", "forge", "serve", str(forge), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def test_killed_at_random_instants_the_forge_stays_whole(tmp_path: Path) -> None:
    forge, work = _forge(tmp_path)
    main = read_ref(forge, MAIN)
    assert main is not None
    chain = [main]
    for number in range(40):
        chain.append(_commit(work, chain[-1], {f"briefs/b{number}.md": b"x" * number}))
    chance = random.Random(23)
    port = 0
    interrupted = 0
    for round_ in range(6):
        at = read_ref(forge, MAIN)
        assert at in chain, at
        start = chain.index(at)
        bodies = tmp_path / f"bodies{round_}"
        bodies.mkdir()
        for index in range(start, min(start + 8, len(chain) - 1)):
            update = RefUpdate(MAIN, chain[index + 1], expected=chain[index])
            (bodies / f"{index:03d}").write_bytes(_body(work, [update]))
        server, url = _serve(forge, port)
        port = int(url.split(":")[2].split("/")[0])
        pusher = subprocess.Popen(
            [sys.executable, "-c", _PUSHER, str(bodies), url.rstrip("/")],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )
        assert pusher.stdout is not None
        pusher.stdout.readline()  # the first push has landed: the rest are in flight
        killer = threading.Timer(chance.uniform(0.0, 0.05), server.send_signal, [signal.SIGKILL])
        killer.start()
        out, _ = pusher.communicate(timeout=120)
        killer.join()
        server.wait(timeout=30)
        assert server.stdout is not None
        server.stdout.close()
        interrupted += len(out.splitlines()) + 1 < len(list(bodies.iterdir()))
        assert read_ref(forge, MAIN) in chain
        git(f"--git-dir={forge}", "fsck", "--connectivity-only", "--no-dangling")
    assert interrupted > 0  # some kills landed while pushes were in flight
    # A restarted server takes the next push (a lock a kill left is cleared as it ages out).
    server, url = _serve(forge, port)
    try:
        at = read_ref(forge, MAIN)
        assert at in chain
        nxt = _commit(work, str(at), {"after.txt": b"after\n"})
        answer = _post(url, _body(work, [RefUpdate(MAIN, nxt, expected=at)]))
        assert b"ok refs/heads/main" in answer and read_ref(forge, MAIN) == nxt
    finally:
        server.terminate()
        server.wait(timeout=30)
        assert server.stdout is not None
        server.stdout.close()
