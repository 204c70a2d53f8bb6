"""The embedded forge: ``assay forge init``, ``assay forge serve``, and ``open_forge``."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from assay.errors import BadInput
from assay.forge import ForgeServer, init_forge, is_forge, open_forge
from tests.conftest import AssayRunner, assay_env, popen_assay
from tests.forge_fixtures import Served, clone, put_on_main


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()


def test_init_makes_main_with_briefs_and_generated_journals(
    run_assay: AssayRunner, tmp_path: Path
) -> None:
    done = run_assay("forge", "init", "f.git", "--json")
    assert done.returncode == 0, done.stderr
    path = tmp_path / "f.git"
    assert is_forge(path)
    work = clone(str(path), tmp_path / "work")
    assert sorted(_git(work, "ls-files").splitlines()) == [".gitattributes", "briefs/README.md"]
    attr = _git(work, "check-attr", "linguist-generated", ".assay/journal/b1/000001.jsonl")
    assert attr.endswith("linguist-generated: true")
    assert _git(work, "check-attr", "linguist-generated", "src/x.py").endswith("unspecified")
    assert _git(work, "log", "--format=%an", "-1") == "assay"


def test_init_is_idempotent_and_refuses_a_foreign_directory(
    run_assay: AssayRunner, tmp_path: Path
) -> None:
    path = init_forge(tmp_path / "f.git")
    main = _git(path, "rev-parse", "main")
    assert init_forge(path) == path
    assert _git(path, "rev-parse", "main") == main
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "file").write_text("x")
    done = run_assay("forge", "init", str(tmp_path / "junk"))
    assert done.returncode == 65 and "not an Assay forge" in done.stderr


def test_smart_http_clone_and_push(http_forge: Served, tmp_path: Path) -> None:
    work = clone(http_forge.url, tmp_path / "work")
    (work / "briefs" / "b1.md").write_text("# b1\n")
    _git(work, "add", ".")
    _git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "brief b1")
    _git(work, "push", "-q", "origin", "main")
    assert _git(http_forge.path, "show", "main:briefs/b1.md") == "# b1"


def test_smart_http_takes_a_push_larger_than_the_post_buffer(
    http_forge: Served, tmp_path: Path
) -> None:
    # Over 1 MiB git streams the request body chunked; the server must de-chunk it.
    work = clone(http_forge.url, tmp_path / "work")
    (work / "blob.bin").write_bytes(os.urandom(3 * 1024 * 1024))
    _git(work, "add", ".")
    _git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "big")
    _git(work, "push", "-q", "origin", "main")
    assert _git(http_forge.path, "rev-parse", "main") == _git(work, "rev-parse", "HEAD")
    fresh = clone(http_forge.url, tmp_path / "fresh")
    assert (fresh / "blob.bin").read_bytes() == (work / "blob.bin").read_bytes()


def test_the_server_answers_only_for_its_own_repository(forge_path: Path, tmp_path: Path) -> None:
    init_forge(tmp_path / "other.git")
    pushes: list[int] = []
    with ForgeServer(forge_path, on_push=lambda: pushes.append(1)) as server:
        conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
        conn.request("GET", "/other.git/info/refs?service=git-upload-pack")
        assert conn.getresponse().status == 404
        conn.close()
        put_on_main(server.url, {"briefs/x.md": "x"})
    assert pushes == [1]


def test_serve_cli_prints_its_url_and_stops_on_sigterm(forge_path: Path, tmp_path: Path) -> None:
    proc = popen_assay(["forge", "serve", str(forge_path), "--port", "0"], cwd=tmp_path)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/forge.git")
        assert not url.endswith(":0/forge.git")
        put_on_main(url, {"briefs/b2.md": "# b2\n"})
        assert _git(forge_path, "show", "main:briefs/b2.md") == "# b2"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err


def test_serve_refuses_what_is_not_a_forge(run_assay: AssayRunner, tmp_path: Path) -> None:
    done = run_assay("forge", "serve", str(tmp_path / "nothing"))
    assert done.returncode == 65 and "not an Assay forge" in done.stderr


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        (None, "ASSAY_FORGE"),
        ("", "--forge"),
        ("ftp://host/x", "unknown scheme"),
        ("/nonexistent/forge.git", "assay forge init"),
    ],
)
def test_open_forge_refuses_bad_specs(spec: str | None, words: str) -> None:
    with pytest.raises(BadInput, match=words):
        open_forge(spec)


_GITHUB_PROBE = """
import json, sys
from pathlib import Path
from assay.errors import BadInput
from assay.forge import open_forge

def attempt():
    try:
        opened = open_forge("github:octo/repo", cache_dir=Path(sys.argv[1]))
    except BadInput as error:
        return {"error": error.message}
    with opened:
        return {"class": type(opened).__name__, "url": opened.display_url}

before = attempt()
loaded = "assay.github" in sys.modules
import assay.github
print(json.dumps({"before": before, "loaded": loaded, "after": attempt()}))
"""


def test_github_is_a_scheme_its_package_registers(tmp_path: Path) -> None:
    # A fresh interpreter: the forge alone does not know github: (and never imports it);
    # importing assay.github registers its opener, which open_forge then uses.
    env = {**assay_env(), "GITHUB_TOKEN": "t0ken", "ASSAY_GITHUB_TOKEN_ENV": "GITHUB_TOKEN"}
    done = subprocess.run(
        [sys.executable, "-c", _GITHUB_PROBE, str(tmp_path / "cache")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    found = json.loads(done.stdout)
    assert "--forge 'github:octo/repo'" in found["before"]["error"]
    assert "not available" in found["before"]["error"]
    assert found["loaded"] is False
    assert found["after"] == {"class": "GitHubForge", "url": "github:octo/repo"}


def test_the_cli_opens_github_forges_without_importing_them_first(
    run_assay: AssayRunner, tmp_path: Path
) -> None:
    # The CLI registers github: at start-up; the adapter (here: its token check) answers.
    env = {"GITHUB_TOKEN": "", "ASSAY_GITHUB_TOKEN_ENV": "", "ASSAY_STATE": str(tmp_path)}
    done = run_assay("claim", "list", "--forge", "github:octo/repo", env=env)
    assert done.returncode == BadInput.code, done.stderr
    assert "no GitHub token" in done.stderr
    assert "not available" not in done.stderr


def test_open_forge_accepts_every_transport(forge_url: str, forge_path: Path) -> None:
    with open_forge(forge_url) as forge:
        main = forge.ls_refs("refs/heads/")["refs/heads/main"]
    assert main == _git(forge_path, "rev-parse", "main")
    with open_forge(str(forge_path)) as by_path:
        assert by_path.url == f"file://{forge_path}"


def test_a_push_naming_a_commit_nobody_wrote_is_a_bug_at_once_not_an_unreachable_forge(
    tmp_path: Path,
) -> None:
    from assay.errors import Internal
    from assay.plumbing import RefUpdate

    init_forge(tmp_path / "f.git")
    with open_forge(str(tmp_path / "f.git")) as forge:
        with pytest.raises(Internal, match=r"refs/heads/x: commit 1{40} is not in") as raised:
            forge.push([RefUpdate("refs/heads/x", "1" * 40, expected=None)])
        assert raised.value.code == 70  # a bug in Assay: nothing here is bad input
        assert "refs/heads/x" not in forge.ls_refs()
