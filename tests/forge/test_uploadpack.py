"""The forge server's in-process fetch (``assay.forge.uploadpack``) against git's own.

- A plain v2 fetch is answered with the objects ``git upload-pack`` sends, framed as it
  frames them, and a desk's fetch over HTTP starts no process on the server.
- A fetch that is not plain is left to git, with nothing answered here: a want that is not
  a ref's tip (a commit no ref reaches, an ancestor, a tree), no ``done``, an argument or
  capability this does not know, a forge with an ``uploadpack``/``transfer`` setting.
- A real ``git fetch`` from the served forge still works, whichever side answers it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pygit2
import pytest

from assay.forge import ForgeServer, fetchpack, open_forge, smarthttp, uploadpack
from assay.forge.embedded import init_forge
from assay.forge.packfile import read_pack
from assay.odb import read_ref
from assay.plumbing import ASSAY_IDENTITY, RefUpdate

MAIN = "refs/heads/main"


def git(*args: str, cwd: Path | None = None, input: bytes | None = None) -> bytes:
    return subprocess.run(
        ["git", *args], cwd=cwd, input=input, capture_output=True, check=True
    ).stdout


def _forge(root: Path) -> tuple[Path, list[str]]:
    """An embedded forge whose main has three commits that change files in place."""
    path = init_forge(root / "forge.git")
    tips = []
    with open_forge(str(path), cache_dir=root / "writer") as forge:
        tip = forge.refresh([MAIN])[MAIN]
        for number in range(3):
            files = {"briefs/a.md": f"a {number}\n".encode(), f"dir/n{number}.txt": b"n\n"}
            commit = forge.commit(files, parents=[tip], message=f"c{number}", author=ASSAY_IDENTITY)
            assert forge.push([RefUpdate(MAIN, commit, expected=tip)]).ok
            tip = commit
            tips.append(commit)
    return path, tips


def _request(*arguments: str, capabilities: tuple[str, ...] = ("agent=t",)) -> bytes:
    lines = [b"command=fetch\n", *(f"{c}\n".encode() for c in capabilities)]
    body = b"".join(smarthttp.pkt_line(line) for line in lines) + smarthttp.DELIM
    body += b"".join(smarthttp.pkt_line(f"{a}\n".encode()) for a in arguments)
    return body + smarthttp.FLUSH


def _here(forge: Path, body: bytes) -> bytes | None:
    refs = smarthttp.RefServer(forge)
    repo = pygit2.Repository(str(forge))
    command = smarthttp.parse_command(body)
    return uploadpack.fetch_answer(
        forge,
        repo,
        command,
        may_serve=lambda oids: refs.may_serve(repo, oids),
        config=refs.config(),
    )


def _gits(forge: Path, body: bytes) -> bytes:
    return subprocess.run(
        ["git", "upload-pack", "--stateless-rpc", str(forge)],
        input=body,
        env={"GIT_PROTOCOL": "version=2", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        check=True,
    ).stdout


def _objects(answer: bytes) -> set[str]:
    return set(read_pack(fetchpack.pack_of(answer, "forge"), "forge"))


@pytest.mark.parametrize("shape", ["clone", "incremental", "two wants"])
def test_the_objects_and_the_framing_are_upload_packs_own(tmp_path: Path, shape: str) -> None:
    forge, tips = _forge(tmp_path)
    claim = None
    if shape == "two wants":
        with open_forge(str(forge), cache_dir=tmp_path / "claimer") as handle:
            claim = handle.commit(
                {"claim.json": b"{}"}, parents=[], message="c", author=ASSAY_IDENTITY
            )
            assert handle.push([RefUpdate("refs/assay/claims/b1", claim, expected=None)]).ok
    wants = [f"want {tips[-1]}"] + ([f"want {claim}"] if claim else [])
    haves = [f"have {tips[0]}"] if shape != "clone" else []
    body = _request("no-progress", "ofs-delta", *wants, *haves, "done")
    ours, theirs = _here(forge, body), _gits(forge, body)
    assert ours is not None
    assert ours.startswith(b"000dpackfile\n") and ours.endswith(b"0000")
    sent, needed = _objects(ours), _objects(theirs)
    assert needed <= sent
    # What git leaves out and this sends is what the client holds already: an object the
    # have reaches at another path (the same blob in another file).
    held = git(f"--git-dir={forge}", "rev-list", "--objects", tips[0]).decode().split()
    assert sent - needed <= (set(held) if haves else set())


def test_a_desks_fetch_over_http_starts_no_process_on_the_server(tmp_path: Path) -> None:
    forge, tips = _forge(tmp_path)
    with ForgeServer(forge) as server:
        with open_forge(server.url, cache_dir=tmp_path / "desk") as desk:
            assert desk.refresh([MAIN]) == {MAIN: tips[-1]}
            assert desk.read_blob(tips[-1], "briefs/a.md") == b"a 2\n"
        assert server.started["fetched"] >= 1 and server.started["upload-pack"] == 0
        assert server.refs.tip_walks == 0  # each want checked from its ref, not every ref


@pytest.mark.parametrize(
    "since", ["moved on", "moved back", "moved back, another ref holds it", "deleted"]
)
def test_a_want_is_served_here_only_while_a_ref_reaches_it(tmp_path: Path, since: str) -> None:
    """ls-refs answered main at its tip; then main moved on (a push), moved back, or went.
    A want of that value is answered here while main (or another ref) still reaches it."""
    forge, tips = _forge(tmp_path)
    refs = smarthttp.RefServer(forge)
    repo = pygit2.Repository(str(forge))
    listed = refs.ls_refs(smarthttp.parse_command(_ls_refs("refs/heads/main")))
    assert listed.startswith(smarthttp.pkt_line(f"{tips[-1]} {MAIN}\n".encode()))
    body = _request(f"want {tips[-1]}", "done")

    def answer() -> bytes | None:
        command = smarthttp.parse_command(body)
        may_serve = lambda oids: refs.may_serve(repo, oids)  # noqa: E731
        return uploadpack.fetch_answer(
            forge, repo, command, may_serve=may_serve, config=refs.config()
        )

    assert answer() is not None and refs.tip_walks == 0  # the answered ref, read alone
    if since == "moved on":
        tree = repo[tips[-1]].peel(pygit2.Commit).tree_id
        sig = pygit2.Signature("t", "t@t", 0, 0)
        later = repo.create_commit(None, sig, sig, "on\n", tree, [pygit2.Oid(hex=tips[-1])])
        git(f"--git-dir={forge}", "update-ref", MAIN, str(later))
    elif since == "deleted":
        git(f"--git-dir={forge}", "update-ref", "-d", MAIN)
    else:
        if since == "moved back, another ref holds it":
            git(f"--git-dir={forge}", "update-ref", "refs/heads/kept", tips[-1])
        git(f"--git-dir={forge}", "update-ref", MAIN, tips[0])
    if since in ("moved on", "moved back, another ref holds it"):
        assert answer() is not None
    else:
        assert answer() is None  # git's to answer: no ref reaches it now
    assert refs.tip_walks == (0 if since == "moved on" else 1)


def _ls_refs(*prefixes: str) -> bytes:
    body = smarthttp.pkt_line(b"command=ls-refs\n") + smarthttp.DELIM
    body += b"".join(smarthttp.pkt_line(f"ref-prefix {p}\n".encode()) for p in prefixes)
    return body + smarthttp.FLUSH


def _unreachable_commit(forge: Path) -> str:
    """A commit in the forge's objects that no ref reaches (a deleted branch's secret)."""
    repo = pygit2.Repository(str(forge))
    blob = repo.create_blob(b"secret\n")
    builder = repo.TreeBuilder()
    builder.insert("secret.txt", blob, pygit2.GIT_FILEMODE_BLOB)
    sig = pygit2.Signature("t", "t@t", 0, 0)
    return str(repo.create_commit(None, sig, sig, "gone\n", builder.write(), []))


@pytest.mark.parametrize(
    "case",
    [
        "unreachable want",
        "ancestor want",
        "tree want",
        "no done",
        "a shallow fetch",
        "a filter",
        "an unknown capability",
        "hidden refs",
    ],
)
def test_what_is_not_plain_is_left_to_git(tmp_path: Path, case: str) -> None:
    forge, tips = _forge(tmp_path)
    want, extra, capabilities = tips[-1], [], ("agent=t",)
    if case == "unreachable want":
        want = _unreachable_commit(forge)
    elif case == "ancestor want":
        want = tips[0]
    elif case == "tree want":
        want = str(pygit2.Repository(str(forge))[tips[-1]].peel(pygit2.Commit).tree_id)
    elif case == "a shallow fetch":
        extra = ["deepen 1"]
    elif case == "a filter":
        extra = ["filter blob:none"]
    elif case == "an unknown capability":
        capabilities = ("agent=t", "server-option=x")
    elif case == "hidden refs":
        git(f"--git-dir={forge}", "config", "uploadpack.hideRefs", "refs/assay")
    done = [] if case == "no done" else ["done"]
    body = _request(f"want {want}", *extra, *done, capabilities=capabilities)
    assert _here(forge, body) is None
    with ForgeServer(forge) as server:
        reply = _post(server.url, body)
        assert server.started["fetched"] == 0 and server.started["upload-pack"] == 1
    assert reply  # git answered, in its own words


def _post(url: str, body: bytes) -> bytes:
    import httpx

    reply = httpx.post(
        f"{url}/git-upload-pack",
        content=body,
        headers={
            "Content-Type": "application/x-git-upload-pack-request",
            "Git-Protocol": "version=2",
        },
        timeout=60,
    )
    return reply.content


def test_git_itself_still_fetches_from_the_served_forge(tmp_path: Path) -> None:
    forge, tips = _forge(tmp_path)
    with ForgeServer(forge) as server:
        clone = tmp_path / "clone.git"
        git("clone", "-q", "--bare", server.url, str(clone))
        git(f"--git-dir={clone}", "fsck", "--strict")
        assert read_ref(clone, MAIN) == tips[-1]
