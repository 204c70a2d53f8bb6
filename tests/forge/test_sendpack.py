"""The in-process push against the real ``assay forge serve`` (receive-pack behind it): every
outcome beside what ``git push`` says for the same situation, races, a lost reply, hooks, a
pruned tip, no git process, and a pusher SIGKILLed inside the push."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from assay.forge import Forge, open_forge, sendpack
from assay.forge.sendpack import NeedsGit
from assay.plumbing import (
    ASSAY_IDENTITY,
    UNCHECKED,
    PushOutcome,
    PushResult,
    RefUpdate,
    RetryPolicy,
)
from assay.plumbing import push as git_push
from tests.forge.test_lost_reply import ReplyDropper
from tests.forge_fixtures import Served, put_on_main, serve_process

ME = ASSAY_IDENTITY
FAST = RetryPolicy(attempts=4, max_seconds=20, initial_wait=0.05, max_wait=0.2)
ROOT = Path(__file__).resolve().parents[2]


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", f"--git-dir={repo}", *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def in_process(forge: Forge, updates: list[RefUpdate], *, atomic: bool = True) -> PushResult:
    """The push made by sendpack itself (never git's), through the forge's settings."""
    result = sendpack.push(
        forge.url,
        forge.state_dir,
        updates,
        atomic=atomic,
        config=forge.git_config,
        display_url=forge.display_url,
        policy=FAST,
    )
    assert result is not None
    return result


@pytest.fixture(params=["http", "file"])
def served(request: pytest.FixtureRequest, forge_path: Path, tmp_path: Path) -> Iterator[Forge]:
    """A forge over smart HTTP (``assay forge serve``) and the same one over ``file://``
    (``git receive-pack`` started directly): every test here runs on both."""
    if request.param == "http":
        url = request.getfixturevalue("http_forge").url
    else:
        url = f"file://{forge_path}"
    with Forge(url, cache_dir=tmp_path / "cache", retry=FAST) as forge:
        yield forge


def commits(forge: Forge) -> tuple[str, str, str]:
    one = forge.commit({"f": b"1"}, parents=[], message="1", author=ME)
    two = forge.commit({"f": b"2"}, parents=[one], message="2", author=ME)
    other = forge.commit({"f": b"x"}, parents=[], message="x", author=ME)
    return one, two, other


# ---------------------------------------------------------------------------- outcomes


def test_every_outcome_is_the_one_git_push_gives(served: Forge, forge_path: Path) -> None:
    one, two, other = commits(served)
    deny = "#!/bin/sh\nwhile read o n r; do case $r in refs/assay/deny/*) exit 1;; esac; done\n"
    hook = forge_path / "hooks" / "pre-receive"
    hook.write_text(deny)
    hook.chmod(0o755)
    cases: list[tuple[str, str | None, Callable[[str], list[RefUpdate]], dict[str, str]]] = [
        ("create", None, lambda r: [RefUpdate(r, one, expected=None)], {}),
        ("fast-forward", one, lambda r: [RefUpdate(r, two, expected=one)], {}),
        ("lease forces", two, lambda r: [RefUpdate(r, other, expected=two)], {}),
        ("stale lease", other, lambda r: [RefUpdate(r, two, expected=one)], {}),
        ("must not exist", other, lambda r: [RefUpdate(r, two, expected=None)], {}),
        ("still at the lease", one, lambda r: [RefUpdate(r, one, expected=one)], {}),
        ("moved from the lease", two, lambda r: [RefUpdate(r, one, expected=one)], {}),
        ("hook declines", None, lambda r: [RefUpdate(r, one, expected=None)], {"deny": "1"}),
        (
            "atomic, one stale",
            one,
            lambda r: [RefUpdate(r + "-new", two, expected=None), RefUpdate(r, two, other)],
            {},
        ),
    ]
    for name, prior, make, flags in cases:
        results: dict[str, PushResult] = {}
        states: dict[str, dict[str, str]] = {}
        for how in ("sendpack", "git"):
            space = "deny" if flags else "t"
            ref = f"refs/assay/{space}/{how}-{name.replace(' ', '-').replace(',', '')}"
            if prior is not None:
                assert git_push(served.state_dir, served.url, [RefUpdate(ref, prior, None)]).ok
            updates = make(ref)
            if how == "sendpack":
                results[how] = in_process(served, updates)
            else:
                results[how] = git_push(served.state_dir, served.url, updates, policy=FAST)
            states[how] = {r.replace(f"/{how}-", "/"): s for r, s in served.ls_refs(ref).items()}
        mine, gits = results["sendpack"], results["git"]
        assert mine.outcome is gits.outcome, (name, mine, gits)
        assert list(mine.refs.values()) == list(gits.refs.values()), (name, mine, gits)
        assert states["sendpack"] == states["git"], name  # the forge ended the same way


def test_a_create_of_a_ref_already_at_that_very_commit_is_the_one_difference(
    served: Forge,
) -> None:
    """git reads the refs first and says "up to date". Over HTTP one POST hears "already
    exists" and, on a first attempt, answers from the refusal alone: the ref is someone
    else's (lost). A local forge's ref is read from its file: up to date, as git says."""
    one, _, _ = commits(served)
    ref = "refs/assay/t/same"
    assert in_process(served, [RefUpdate(ref, one, expected=None)]).outcome is PushOutcome.CREATED
    again = in_process(served, [RefUpdate(ref, one, expected=None)])
    if served.url.startswith("http"):
        assert again.outcome is PushOutcome.STALE and again.lost
    else:
        assert again.outcome is PushOutcome.UP_TO_DATE
    by_git = git_push(served.state_dir, served.url, [RefUpdate(ref, one, expected=None)])
    assert by_git.outcome is PushOutcome.UP_TO_DATE


def test_non_atomic_pushes_report_each_ref(served: Forge) -> None:
    one, two, other = commits(served)
    a, b = "refs/assay/t/na-a", "refs/assay/t/na-b"
    assert in_process(served, [RefUpdate(a, one, None), RefUpdate(b, other, None)]).ok
    result = in_process(
        served, [RefUpdate(a, two, expected=one), RefUpdate(b, two, expected=one)], atomic=False
    )
    assert result.refs == {a: PushOutcome.FAST_FORWARD, b: PushOutcome.STALE}
    assert served.ls_refs("refs/assay/t/") == {a: two, b: other}


def test_forge_push_hands_deletes_and_unconditional_updates_to_git(served: Forge) -> None:
    one, two, _ = commits(served)
    ref = "refs/assay/t/path"
    assert served.push([RefUpdate(ref, one, expected=None)]).outcome is PushOutcome.CREATED
    assert served.push_from(served.state_dir, [RefUpdate(ref, two, one)]).ok
    assert (
        sendpack.push(
            served.url,
            served.state_dir,
            [RefUpdate(ref, None, two)],
            atomic=True,
            config={},
            display_url=served.url,
        )
        is None
    )  # git reads the refs before a delete: the server would delete a ref whose
    # expected object it lacks unconditionally
    assert served.push([RefUpdate(ref, None, expected=two)]).outcome is PushOutcome.DELETED
    assert served.push([RefUpdate(ref, one, expected=UNCHECKED)]).ok
    assert served.ls_refs("refs/assay/t/") == {ref: one}


# ---------------------------------------------------------------------------- no git at all


def test_an_http_push_starts_no_git_process(
    forge_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serve_process(forge_path) as url, open_forge(url, cache_dir=tmp_path / "c") as f:
        main = f.refresh(["refs/heads/main"])["refs/heads/main"]
        files = {f"src/{n}.py": f"x = {n}\n".encode() for n in range(50)}
        step = f.commit(files, parents=[main], message="step", author=ME)
        claim = f.commit({"claim.json": b"{}"}, parents=[], message="c", author=ME)
        log = tmp_path / "git-calls"
        wrapper = tmp_path / "bin"
        wrapper.mkdir()
        (wrapper / "git").write_text(f'#!/bin/sh\necho "$@" >> {log}\nexit 1\n')
        (wrapper / "git").chmod(0o755)
        with monkeypatch.context() as patched:
            patched.setenv("PATH", str(wrapper))
            updates = [
                RefUpdate("refs/heads/assay/b1", step, expected=None),
                RefUpdate("refs/assay/claims/b1", claim, expected=None),
            ]
            assert f.push(updates).outcome is PushOutcome.CREATED
            stale = f.push([RefUpdate("refs/assay/claims/b1", step, expected=None)])
            assert stale.lost
        assert not log.exists()  # the wrapper never ran: no git process started
        assert f.ls_refs("refs/") == {
            "refs/heads/main": main,
            "refs/heads/assay/b1": step,
            "refs/assay/claims/b1": claim,
        }
    git(forge_path, "fsck", "--strict", "--no-dangling")  # what landed is whole


@pytest.mark.parametrize("hook", [None, "update"])
def test_a_local_push_starts_no_git_or_receive_pack_alone(
    forge_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hook: str | None
) -> None:
    """Over ``file://`` a plain push is taken in process (no git at all); on a forge with a
    hook only git runs (an ``update`` hook here) the only git process is the forge's own
    receive-pack (git push would add itself, a shell, send-pack's pack-objects): a wrapper
    on PATH logs each start."""
    if hook is not None:
        (forge_path / "hooks" / hook).write_text("#!/bin/sh\nexit 0\n")
        (forge_path / "hooks" / hook).chmod(0o755)
    real = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True)
    log = tmp_path / "git-calls"
    log.write_text("")
    wrapper = tmp_path / "bin"
    wrapper.mkdir()
    (wrapper / "git").write_text(
        f'#!/bin/sh\necho "$@" >> {log}\nexec {real.stdout.strip()} "$@"\n'
    )
    (wrapper / "git").chmod(0o755)
    with open_forge(str(forge_path), cache_dir=tmp_path / "c") as forge:
        claim = forge.commit({"claim.json": b"{}"}, parents=[], message="c", author=ME)
        with monkeypatch.context() as patched:
            patched.setenv("PATH", f"{wrapper}:{os.environ['PATH']}")
            result = forge.push([RefUpdate("refs/assay/claims/b1", claim, expected=None)])
        assert result.outcome is PushOutcome.CREATED
        expected = [] if hook is None else [f"receive-pack --stateless-rpc {forge_path}"]
        assert log.read_text().splitlines() == expected


# ---------------------------------------------------------------------------- races, replies


def race(
    gate: threading.Barrier,
    forge: Forge,
    ref: str,
    commit: str,
    results: list[PushResult | None],
    n: int,
) -> None:
    gate.wait()
    results[n] = forge.push([RefUpdate(ref, commit, expected=None)])


@pytest.mark.parametrize("transport", ["http", "file"])
def test_two_racing_pushes_one_wins(
    request: pytest.FixtureRequest, forge_path: Path, tmp_path: Path, transport: str
) -> None:
    if transport == "http":
        url = request.getfixturevalue("http_forge").url
    else:
        url = f"file://{forge_path}"
    forges = [Forge(url, cache_dir=tmp_path / f"c{n}", retry=FAST) for n in range(2)]
    try:
        for round_ in range(5):
            ref = f"refs/assay/claims/race-{round_}"
            mine = [
                f.commit({"h": f"{n}".encode()}, parents=[], message="c", author=ME)
                for n, f in enumerate(forges)
            ]
            gate = threading.Barrier(2)
            results: list[PushResult | None] = [None, None]
            threads = [
                threading.Thread(target=race, args=(gate, forges[n], ref, mine[n], results, n))
                for n in range(2)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
            assert all(r is not None for r in results)
            won = [n for n, r in enumerate(results) if r is not None and r.ok]
            assert len(won) == 1, results
            loser = results[1 - won[0]]
            assert loser is not None and loser.lost
            assert forges[0].ls_refs(ref) == {ref: mine[won[0]]}
    finally:
        for forge in forges:
            forge.close()


def test_a_retry_after_a_lost_reply_finds_the_push_ours_as_git_does(
    http_forge: Served, tmp_path: Path
) -> None:
    port = int(http_forge.url.split(":")[2].split("/")[0])
    proxy = ReplyDropper(port)
    url = f"http://127.0.0.1:{proxy.port}/{http_forge.path.name}"
    try:
        with Forge(url, cache_dir=tmp_path / "cache", retry=FAST) as forge:
            one, two, _ = commits(forge)
            for how, ref in (("sendpack", "refs/assay/t/lost-a"), ("git", "refs/assay/t/lost-b")):
                assert git_push(forge.state_dir, url, [RefUpdate(ref, one, None)]).ok
                proxy.drop_pushes, proxy.dropped = 1, 0
                update = [RefUpdate(ref, two, expected=one)]
                if how == "sendpack":
                    result = in_process(forge, update)
                else:
                    result = git_push(forge.state_dir, url, update, policy=FAST)
                assert proxy.dropped == 1, how  # the first reply was lost after it landed
                assert result.outcome is PushOutcome.UP_TO_DATE, (how, result)
                assert forge.ls_refs(ref) == {ref: two}
    finally:
        proxy.close()


# ---------------------------------------------------------------------------- hooks, pruning


def test_the_forges_hooks_still_run(served: Forge, forge_path: Path, tmp_path: Path) -> None:
    seen = tmp_path / "post-receive.log"
    hook = forge_path / "hooks" / "post-receive"
    hook.write_text(f"#!/bin/sh\ncat >> {seen}\n")
    hook.chmod(0o755)
    event = served.commit({"event.json": b"{}"}, parents=[], message="e", author=ME)
    ref = "refs/assay/events/b1"
    assert in_process(served, [RefUpdate(ref, event, expected=None)]).ok
    assert seen.read_text() == f"{'0' * 40} {event} {ref}\n"


def test_the_wake_hook_hears_an_events_push(served: Forge, forge_path: Path) -> None:
    """The forge's own wake hook (assay.sweep.hook) runs for an in-process push and tells a
    listening desk host which brief to wake."""
    from assay.sweep.hook import install_wake_hook

    folder = Path(tempfile.mkdtemp(prefix="wake-", dir="/tmp"))  # a short Unix socket path
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(folder / "host.sock"))
    listener.listen(1)
    listener.settimeout(60)
    try:
        install_wake_hook(forge_path, host_socket=folder / "host.sock", workdir=folder)
        event = served.commit({"event.json": b"{}"}, parents=[], message="e", author=ME)
        assert in_process(served, [RefUpdate("refs/assay/events/b1", event, None)]).ok
        conn, _ = listener.accept()
        with conn:
            heard = conn.recv(1024)
    finally:
        listener.close()
        shutil.rmtree(folder, ignore_errors=True)
    assert heard == b"wake b1\n"


def test_a_pruned_hidden_tip_falls_back_to_git_and_lands(served: Forge, forge_path: Path) -> None:
    gone = put_on_main(forge_path, {"briefs/a.md": b"# a\n"})
    assert served.refresh(["refs/heads/main"]) == {"refs/heads/main": gone}
    # the forge forgets that commit (main reset, the objects pruned) after we fetched it
    first = git(forge_path, "rev-parse", f"{gone}^")
    git(forge_path, "update-ref", "refs/heads/main", first)
    git(forge_path, "reflog", "expire", "--expire=now", "--all")
    git(forge_path, "gc", "--prune=now", "--quiet")
    missing = subprocess.run(["git", f"--git-dir={forge_path}", "cat-file", "-e", gone])
    assert missing.returncode != 0
    step = served.commit(
        {"briefs/a.md": b"# a\n", "b.txt": b"b"}, parents=[gone], message="s", author=ME
    )
    update = [RefUpdate("refs/heads/assay/b1", step, expected=None)]
    with pytest.raises(NeedsGit, match="lacks objects"):  # the pack left out what it lost
        sendpack.push(
            served.url,
            served.state_dir,
            update,
            atomic=True,
            config={},
            display_url=served.url,
            hidden=lambda: [gone],
            policy=FAST,
        )
    assert served.ls_refs("refs/heads/assay/") == {}
    # Forge.push hands that push to git, which reads the refs and sends what is missing
    assert served.push(update).outcome is PushOutcome.CREATED
    assert served.ls_refs("refs/heads/assay/") == {"refs/heads/assay/b1": step}
    git(forge_path, "fsck", "--strict", "--no-dangling")


def test_the_pack_leaves_out_what_the_forge_holds(served: Forge) -> None:
    base_files = {f"d{n // 100}/f{n}.txt": f"{n}\n".encode() for n in range(400)}
    base = served.commit(base_files, parents=[], message="b", author=ME)
    step = served.commit(
        {**base_files, "d3/f399.txt": b"changed\n"}, parents=[base], message="s", author=ME
    )
    whole = sendpack.build_pack(served.state_dir, [step], hidden=[])
    thin = sendpack.build_pack(served.state_dir, [step], hidden=[base])
    # two commits, both roots and d0-d3 of base and a new d3, 400 blobs and the changed one
    assert int.from_bytes(whole[8:12], "big") == 2 + (2 + 4 + 1) + (400 + 1)
    # the commit, the root tree, d3/, and the one changed blob
    assert int.from_bytes(thin[8:12], "big") == 4
    # what git's index-pack makes of it is a valid pack holding those objects
    packs = served.state_dir / "verify"
    packs.mkdir()
    (packs / "p.pack").write_bytes(thin)
    subprocess.run(["git", "index-pack", str(packs / "p.pack")], check=True, capture_output=True)
    listed = subprocess.run(
        ["git", "verify-pack", "-v", str(packs / "p.idx")], capture_output=True, text=True
    ).stdout
    assert step in listed and git(served.state_dir, "rev-parse", f"{step}:d3/f399.txt") in listed


# ---------------------------------------------------------------------------- SIGKILL inside


class Cutter:
    """A proxy that passes one push to the forge cut short (``half``: the forge's
    receive-pack reads half the body and then its end) or whole (``whole``: the forge answers,
    the pusher never hears it), tells the test it got there, and holds the pusher until the
    test has killed it."""

    def __init__(self, target_port: int, mode: str) -> None:
        self.target_port, self.mode = target_port, mode
        self.reached, self.release = threading.Event(), threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        client, _ = self._listener.accept()
        head = b""
        while b"\r\n\r\n" not in head:
            head += client.recv(65536)
        header, _, body = head.partition(b"\r\n\r\n")
        found = re.search(rb"(?im)^content-length: *(\d+)", header)
        assert found is not None
        length = int(found.group(1))
        while len(body) < length:
            body += client.recv(65536)
        if self.mode == "half":
            body = body[: length // 2]
            header = header.replace(found.group(0), b"Content-Length: %d" % len(body))
        with socket.create_connection(("127.0.0.1", self.target_port)) as upstream:
            upstream.sendall(header + b"\r\n\r\n" + body)
            while upstream.recv(65536):  # the forge finishes (or refuses) the push
                pass
        self.reached.set()
        self.release.wait(60)
        client.close()
        self._listener.close()


PUSHER = """
import sys
from pathlib import Path
from assay.forge import Forge
from assay.plumbing import RefUpdate, RetryPolicy
url, cache, a, old, new_a, new_b = sys.argv[1:]
forge = Forge(url, cache_dir=Path(cache), retry=RetryPolicy(attempts=1))
forge.push([RefUpdate(a, new_a, expected=old), RefUpdate(a + "-b", new_b, expected=None)])
"""


@pytest.mark.parametrize("mode", ["half", "whole"])
def test_a_pusher_killed_inside_the_push_leaves_the_refs_old_or_new(
    http_forge: Served, tmp_path: Path, mode: str
) -> None:
    served = Forge(http_forge.url, cache_dir=tmp_path / "cache", retry=FAST)
    one, two, other = commits(served)
    files = {f"src/{n}.txt": f"{n}\n".encode() * 50 for n in range(200)}
    big = served.commit(files, parents=[one], message="big", author=ME)
    a = "refs/assay/claims/crash"
    assert served.push([RefUpdate(a, one, expected=None)]).ok
    port = int(http_forge.url.split(":")[2].split("/")[0])
    cutter = Cutter(port, mode)
    url = f"http://127.0.0.1:{cutter.port}/{http_forge.path.name}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-c", PUSHER, url, str(served.state_dir), a, one, big, other]
    child = subprocess.Popen(args, env=env, stderr=subprocess.DEVNULL)
    try:
        assert cutter.reached.wait(60), "the pusher never reached the forge"
        child.send_signal(signal.SIGKILL)
        assert child.wait(30) == -signal.SIGKILL
    finally:
        cutter.release.set()
    refs = served.ls_refs("refs/assay/claims/")
    if mode == "half":  # receive-pack read a cut pack: nothing moved
        assert refs == {a: one}
    else:  # the forge took the whole push before the pusher died: all of it moved
        assert refs == {a: big, a + "-b": other}
    git(http_forge.path, "fsck", "--strict", "--no-dangling")
    # the next push from what is on the forge is right, and a stale one is refused
    tip = refs[a]
    assert served.push([RefUpdate(a, two, expected=tip)]).ok
    stale = served.push([RefUpdate(a, other, expected=tip)])
    assert stale.lost and served.ls_refs(a)[a] == two
    served.close()
