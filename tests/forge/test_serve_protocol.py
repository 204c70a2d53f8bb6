"""The forge server's in-process answers are git's own, byte for byte, and start no process.

Each answer the server gives from libgit2 (upload-pack's v2 capabilities, receive-pack's ref
advertisement, v2 ``ls-refs``) is compared with what git 2.39's ``upload-pack`` /
``receive-pack --stateless-rpc`` write for the same request on the same repository, with
tags, a symbolic ref, an unborn HEAD and ``hideRefs`` in the config.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.forge import ForgeServer
from assay.forge.smarthttp import FLUSH, pkt_line, service_env
from tests.forge.serving import request
from tests.forge_fixtures import clone, put_on_main

V2 = {"Git-Protocol": "version=2"}


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()


def _git_service(
    forge: Path, service: str, body: bytes, *, protocol: str, advertise: bool
) -> bytes:
    args = ["git", service, "--stateless-rpc", *(["--advertise-refs"] if advertise else []), "."]
    env = service_env(remote_addr="127.0.0.1", git_protocol=protocol)
    return subprocess.run(
        args, cwd=forge, input=body, env=env, capture_output=True, check=True, timeout=60
    ).stdout


@pytest.fixture
def rich_forge(forge_path: Path) -> Path:
    """A forge with claims, tags (annotated and light), a symref and hidden refs."""
    put_on_main(str(forge_path), {"briefs/b1.md": "# b1\n"})
    main = _git(forge_path, "rev-parse", "main")
    for ref in ("refs/assay/claims/b1", "refs/assay/secret/x", "refs/hidden/y", "refs/heads/z"):
        _git(forge_path, "update-ref", ref, main)
    _git(forge_path, "-c", "user.name=t", "-c", "user.email=t@t", "tag", "-a", "-m", "v1", "v1")
    _git(forge_path, "-c", "user.name=t", "-c", "user.email=t@t", "tag", "-a", "-m", "o", "o", "v1")
    _git(forge_path, "tag", "light", main)
    _git(forge_path, "symbolic-ref", "refs/heads/alias", "refs/heads/main")
    _git(forge_path, "config", "--add", "transfer.hideRefs", "refs/hidden/")
    _git(forge_path, "config", "--add", "uploadpack.hideRefs", "refs/assay/secret")
    _git(forge_path, "config", "--add", "receive.hideRefs", "refs/heads")
    _git(forge_path, "config", "--add", "receive.hideRefs", "!refs/heads/z")
    return forge_path


@pytest.fixture
def server(rich_forge: Path) -> Iterator[ForgeServer]:
    with ForgeServer(rich_forge) as served:
        yield served


def _request(
    server: ForgeServer, method: str, path: str, body: bytes | None = None, **headers: str
) -> tuple[int, bytes]:
    return request(server, method, f"/{server.name}{path}", body, **headers)


def _ls_refs(*args: str) -> bytes:
    head = pkt_line(b"command=ls-refs\n") + pkt_line(b"agent=git/2.39.5\n")
    head += pkt_line(b"object-format=sha1\n") + b"0001"
    return head + b"".join(pkt_line(f"{arg}\n".encode()) for arg in args) + FLUSH


def _post_ls_refs(server: ForgeServer, body: bytes) -> tuple[int, bytes]:
    return _request(
        server,
        "POST",
        "/git-upload-pack",
        body,
        **V2,
        **{"Content-Type": "application/x-git-upload-pack-request"},
    )


def test_receive_pack_advertisement_is_gits_own(server: ForgeServer, rich_forge: Path) -> None:
    status, body = _request(server, "GET", "/info/refs?service=git-receive-pack")
    git = _git_service(rich_forge, "receive-pack", b"", protocol="", advertise=True)
    assert status == 200
    assert body == pkt_line(b"# service=git-receive-pack\n") + FLUSH + git
    assert b"refs/heads/z" in body and b"refs/heads/main" not in body  # hideRefs and "!"
    assert b"refs/hidden/" not in body


def test_receive_pack_advertisement_of_a_forge_with_no_refs(tmp_path: Path) -> None:
    from assay.forge import init_forge

    forge = init_forge(tmp_path / "forge.git")
    with ForgeServer(forge) as served:
        _git(forge, "update-ref", "-d", "refs/heads/main")  # after the forge check at start
        status, body = _request(served, "GET", "/info/refs?service=git-receive-pack")
    git = _git_service(forge, "receive-pack", b"", protocol="", advertise=True)
    assert status == 200 and b"capabilities^{}" in body
    assert body == pkt_line(b"# service=git-receive-pack\n") + FLUSH + git


def test_upload_pack_v2_capabilities_are_gits_own(server: ForgeServer, rich_forge: Path) -> None:
    status, body = _request(server, "GET", "/info/refs?service=git-upload-pack", **V2)
    assert status == 200
    assert body == _git_service(
        rich_forge, "upload-pack", b"", protocol="version=2", advertise=True
    )
    assert body.startswith(b"000eversion 2\n")


@pytest.mark.parametrize(
    "args",
    [
        (),
        ("symrefs", "peel", "unborn"),
        ("symrefs", "ref-prefix HEAD", "ref-prefix refs/heads/", "ref-prefix refs/tags/"),
        ("peel", "ref-prefix refs/tags/o"),
        ("ref-prefix refs/assay/claims/", "ref-prefix refs/assay/claims/b1"),
        ("ref-prefix refs/assay/secret/", "ref-prefix refs/hidden/"),
        ("ref-prefix ",),
        ("ref-prefix ../../../etc/passwd", "ref-prefix refs/../../", "ref-prefix /refs"),
        (*(f"ref-prefix refs/none/{n}" for n in range(5000)), "ref-prefix refs/heads/"),
        ("ref-prefix refs/assay/claims/b",),
        ("symrefs", "ref-prefix refs/heads/a", "ref-prefix refs/heads/ma", "ref-prefix refs/t"),
        ("ref-prefix refs",),
        ("ref-prefix refs/assay/claims/b1/", "ref-prefix refs/heads/main.lock"),
    ],
)
def test_ls_refs_answers_as_upload_pack_does(
    server: ForgeServer, rich_forge: Path, args: tuple[str, ...]
) -> None:
    request = _ls_refs(*args)
    status, body = _post_ls_refs(server, request)
    assert status == 200
    assert body == _git_service(
        rich_forge, "upload-pack", request, protocol="version=2", advertise=False
    )


def test_ls_refs_by_prefix_reads_packed_and_loose_refs_as_upload_pack_does(
    server: ForgeServer, rich_forge: Path
) -> None:
    """Refs found by name (a prefix of one brief's refs) and not by a walk of every ref:
    packed ones, a loose one over its packed value, one deleted from packed-refs, a new
    folder of loose ones, and a lock file left beside them."""
    _git(rich_forge, "pack-refs", "--all")
    main = _git(rich_forge, "rev-parse", "main")
    light = _git(rich_forge, "rev-parse", "light^{commit}")
    ident = ("-c", "user.name=t", "-c", "user.email=t@t")
    moved = _git(rich_forge, *ident, "commit-tree", f"{main}^{{tree}}", "-p", main, "-m", "m")
    _git(rich_forge, "update-ref", "refs/assay/claims/b1", moved)  # loose, over the packed
    _git(rich_forge, "update-ref", "-d", "refs/heads/z")
    for name in ("b10", "b2", "b12/deep", "x"):
        _git(rich_forge, "update-ref", f"refs/assay/runs/{name}", main if name != "x" else light)
    (rich_forge / "refs/assay/runs/b11.lock").write_text(main + "\n")
    for args in (
        ("ref-prefix refs/assay/claims/b1",),
        ("ref-prefix refs/assay/runs/b1", "ref-prefix refs/heads/z"),
        ("ref-prefix refs/assay/runs/", "ref-prefix refs/tags/"),
        ("symrefs", "ref-prefix refs/heads/", "ref-prefix refs/assay/runs/b12/"),
    ):
        request = _ls_refs(*args)
        status, body = _post_ls_refs(server, request)
        assert status == 200
        assert body == _git_service(
            rich_forge, "upload-pack", request, protocol="version=2", advertise=False
        ), args


def test_ls_refs_of_an_unborn_head(server: ForgeServer, rich_forge: Path) -> None:
    _git(rich_forge, "symbolic-ref", "HEAD", "refs/heads/nothing-yet")
    answers = []
    for args in (("symrefs", "unborn"), ("symrefs",), ("unborn",)):
        request = _ls_refs(*args)
        status, body = _post_ls_refs(server, request)
        git = _git_service(
            rich_forge, "upload-pack", request, protocol="version=2", advertise=False
        )
        assert (status, body) == (200, git)
        answers.append(body)
    assert b"unborn HEAD symref-target:refs/heads/nothing-yet" in answers[0]
    assert b"HEAD" not in answers[1] + answers[2]


def test_ls_refs_sees_a_ref_pushed_a_moment_ago(server: ForgeServer, tmp_path: Path) -> None:
    # receive.hideRefs hides main from pushers; the config is read per request, not at start.
    _git(server.path, "config", "--unset-all", "receive.hideRefs")
    put_on_main(server.url, {"briefs/new.md": "# new\n"})
    _, body = _post_ls_refs(server, _ls_refs("ref-prefix refs/heads/main"))
    tip = _git(server.path, "rev-parse", "main")
    assert body == pkt_line(f"{tip} refs/heads/main\n".encode()) + FLUSH


def _counting_git(tmp_path: Path) -> tuple[Path, Path]:
    """A ``git`` first on PATH that logs each start, then runs the real git."""
    bin_dir, log = tmp_path / "bin", tmp_path / "git-starts.log"
    bin_dir.mkdir()
    real = subprocess.run(["which", "git"], capture_output=True, text=True, check=True)
    wrapper = bin_dir / "git"
    wrapper.write_text(f'#!/bin/sh\necho "$1" >> {log}\nexec {real.stdout.strip()} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return bin_dir, log


def test_ref_reads_start_no_process_and_a_fetch_starts_only_upload_pack(
    rich_forge: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir, log = _counting_git(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    with ForgeServer(rich_forge) as served:
        assert log.read_text().split() == ["upload-pack", "receive-pack"]  # once, at start
        log.write_text("")
        assert _request(served, "GET", "/info/refs?service=git-upload-pack", **V2)[0] == 200
        assert _request(served, "GET", "/info/refs?service=git-receive-pack")[0] == 200
        assert _post_ls_refs(served, _ls_refs("symrefs", "peel"))[0] == 200
        assert log.read_text() == ""
        work = clone(served.url, tmp_path / "work")
        assert (work / "briefs" / "b1.md").read_text() == "# b1\n"
    started = log.read_text().split()  # the client's clone, fetch-pack, index-pack too
    assert started.count("upload-pack") == 1  # the fetch's, and only it


@pytest.mark.parametrize("version", ["0", "1", "2"])
def test_clients_of_each_protocol_version_fetch_and_push(
    forge_path: Path, tmp_path: Path, version: str
) -> None:
    with ForgeServer(forge_path) as served:
        work = tmp_path / "work"
        subprocess.run(
            ["git", "-c", f"protocol.version={version}", "clone", "-q", served.url, str(work)],
            check=True,
            timeout=60,
        )
        (work / "briefs" / "v.md").write_text(f"# v{version}\n")
        _git(work, "add", ".")
        _git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "v")
        _git(work, "-c", f"protocol.version={version}", "push", "-q", "origin", "main")
        listed = _git(work, "-c", f"protocol.version={version}", "ls-remote", served.url, "main")
    assert listed.split()[0] == _git(work, "rev-parse", "HEAD")
    assert _git(forge_path, "show", "main:briefs/v.md") == f"# v{version}"
