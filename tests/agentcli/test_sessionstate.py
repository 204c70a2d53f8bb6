"""The CLI's session state between its HOME and the checkpoint, attacked from both sides:
the sandboxed CLI writes its HOME (a link to a host file, a FIFO, a huge file, a token in
its transcript, its credentials beside its session), and whoever pushes to the journal ref
writes the checkpoint (a path out of HOME, a file no profile records, a link, a changed
file). Nothing but the session files, redacted, reaches the work tree; nothing but those
files, as recorded, reaches the resumed CLI's HOME."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from assay.agentcli.profiles import get_profile
from assay.agentcli.resume import NativeResume
from assay.agentcli.sessionstate import (
    POINT,
    StateRefused,
    capture,
    covers,
    load_point,
    point_commit,
    restore,
    session_files,
    state_folder,
)
from assay.errors import Denied
from assay.sandbox import SandboxSpec, run_sandboxed, sandbox_environment
from assay.sandbox.bwrap import HOME
from assay.sandbox.scan import CheckpointScan


def claude_resume() -> NativeResume:
    resume = get_profile("claude-code").resume
    assert resume is not None
    return resume


RESUME = claude_resume()
PROJECT = ".claude/projects/-w"
TRANSCRIPT = f"{PROJECT}/5cfc9e22.jsonl"
TOKEN = "assay-gateway-token-9d41c2e7"
SECRET = "sk-upstream-secret-0b7e44a1"


def make_home(root: Path) -> Path:
    home = root / "home"
    (home / PROJECT).mkdir(parents=True)
    line = {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t1"}]}}
    (home / TRANSCRIPT).write_text(json.dumps(line) + "\n")
    # what the CLI keeps beside its session: configuration that holds the token, its login
    (home / ".assay-mcp.json").write_text(json.dumps({"headers": {"Authorization": TOKEN}}))
    (home / ".claude" / ".credentials.json").write_text('{"oauth": "x"}')
    (home / ".claude" / "settings.json").write_text('{"hooks": {}}')
    return home


def record(home: Path, tree: Path, *, at: int = 3) -> None:
    tree.mkdir(parents=True, exist_ok=True)
    files = session_files(home, RESUME)
    capture(
        files,
        tree=tree,
        brief="b1",
        profile="claude-code",
        session="5cfc9e22",
        at=at,
        withheld=[TOKEN, SECRET],
    )


def test_only_the_session_files_are_recorded_redacted_and_the_scan_stays_clean(
    tmp_path: Path,
) -> None:
    home, tree = make_home(tmp_path), tmp_path / "tree"
    subprocess.run(["git", "init", "-q", str(tree)], check=True)  # a checkpoint's work tree
    with (home / TRANSCRIPT).open("a") as handle:  # the agent printed its environment
        handle.write(json.dumps({"tool_result": f"KEY={TOKEN} UP={SECRET}"}) + "\n")
    record(home, tree)
    folder = state_folder(tree, "b1")
    recorded = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert recorded == [f"home/{TRANSCRIPT}", POINT]
    text = (folder / "home" / TRANSCRIPT).read_text()
    assert TOKEN not in text and SECRET not in text and text.count("[redacted]") == 2
    CheckpointScan([TOKEN, SECRET]).check_worktree(tree)  # no Denied
    unredacted = tmp_path / "unredacted"  # what the scan would have said without it
    subprocess.run(["git", "init", "-q", str(unredacted)], check=True)
    files = session_files(home, RESUME)
    capture(
        files, tree=unredacted, brief="b1", profile="claude-code", session="s", at=3, withheld=[]
    )
    with pytest.raises(Denied, match=r"5cfc9e22\.jsonl"):
        CheckpointScan([SECRET]).check_worktree(unredacted)
    point = json.loads((folder / POINT).read_text())
    assert (
        point["at"] == 3 and point["session"] == "5cfc9e22" and list(point["files"]) == [TRANSCRIPT]
    )


def test_a_link_a_fifo_or_a_linked_folder_named_like_a_session_file_is_not_read(
    tmp_path: Path,
) -> None:
    home = make_home(tmp_path)
    host_secret = tmp_path / "host-secret"
    host_secret.write_text(SECRET)
    os.symlink(host_secret, home / PROJECT / "stolen.jsonl")
    os.mkfifo(home / PROJECT / "wedge.jsonl")  # opening it to read would block forever
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.jsonl").write_text(SECRET)
    os.symlink(elsewhere, home / ".claude" / "projects" / "-linked")
    done = threading.Event()
    found: dict[str, bytes] = {}

    def read() -> None:
        found.update(session_files(home, RESUME))
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(30), "reading the session files blocked on a FIFO"
    assert list(found) == [TRANSCRIPT]
    assert not any(SECRET.encode() in data for data in found.values())


def test_a_session_file_past_the_bound_is_refused_before_it_is_read(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    with (home / PROJECT / "huge.jsonl").open("wb") as handle:
        handle.truncate(257 << 20)  # sparse: nothing is written, the size is what counts
    with pytest.raises(StateRefused, match=r"huge\.jsonl: 269484032 bytes, over"):
        session_files(home, RESUME)


def test_a_line_the_cli_is_writing_is_left_out_and_a_request_waits_for_its_results(
    tmp_path: Path,
) -> None:
    home = make_home(tmp_path)
    with (home / TRANSCRIPT).open("a") as handle:
        handle.write('{"type": "user", "message": {"content": [{"tool_use_id":"t2"')  # half
    files = session_files(home, RESUME)
    assert files[TRANSCRIPT].endswith(b"}\n") and b"t2" not in files[TRANSCRIPT]
    assert covers(files, RESUME, ["t1"]) is False  # Claude Code writes "tool_use_id":"t1"
    (home / TRANSCRIPT).write_text('{"content": [{"tool_use_id":"t1"}]}\n')
    assert covers(session_files(home, RESUME), RESUME, ["t1"])


def forged(tree: Path, **change: object) -> None:
    path = state_folder(tree, "b1") / POINT
    point = json.loads(path.read_text())
    point.update(change)
    path.write_text(json.dumps(point))


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"files": {"../../.ssh/authorized_keys": "sha256:0"}}, "not a path inside HOME"),
        ({"files": {"/etc/cron.d/x": "sha256:0"}}, "not a path inside HOME"),
        (
            {"files": {".claude/settings.json": "sha256:0"}},
            "not one of the profile's session files",
        ),
        ({"files": {".bashrc": "sha256:0"}}, "not one of the profile's session files"),
        ({"profile": "codex"}, "recorded for the 'codex' profile"),
        ({"session": "x; rm -rf ~"}, "not a session id"),
        ({"at": "3"}, "not a journal position"),
        ({"v": 2}, "not a version 1 resume point"),
    ],
)
def test_a_forged_point_is_refused(tmp_path: Path, change: dict[str, object], reason: str) -> None:
    home, tree = make_home(tmp_path), tmp_path / "tree"
    record(home, tree)
    forged(tree, **change)
    with pytest.raises(StateRefused, match=reason):
        load_point(tree, "b1", RESUME, profile="claude-code")


def test_a_changed_or_linked_recorded_file_never_reaches_the_resumed_home(tmp_path: Path) -> None:
    home, tree = make_home(tmp_path), tmp_path / "tree"
    record(home, tree)
    point = load_point(tree, "b1", RESUME, profile="claude-code")
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    restore(point, tree=tree, brief="b1", home=fresh)
    assert (fresh / TRANSCRIPT).read_bytes() == (home / TRANSCRIPT).read_bytes()
    assert sorted(p.relative_to(fresh).as_posix() for p in fresh.rglob("*") if p.is_file()) == [
        TRANSCRIPT
    ]

    copy = state_folder(tree, "b1") / "home" / TRANSCRIPT
    copy.write_text('{"forged": true}\n')
    again = tmp_path / "again"
    again.mkdir()
    with pytest.raises(StateRefused, match="its hash is not the point's"):
        restore(point, tree=tree, brief="b1", home=again)
    copy.unlink()
    host_file = tmp_path / "host-file"
    host_file.write_bytes((home / TRANSCRIPT).read_bytes())  # even with the right bytes
    os.symlink(host_file, copy)
    with pytest.raises(StateRefused, match="not a regular file"):
        restore(point, tree=tree, brief="b1", home=again)
    assert not list(again.rglob("*"))


def test_the_point_is_taken_from_the_checkpoint_it_was_captured_in(tmp_path: Path) -> None:
    """Checkpoints after the point's (a side request, a tool step) hold the same point: the
    files to restore are the ones of the checkpoint that captured it."""
    home, tree = make_home(tmp_path), tmp_path / "tree"
    subprocess.run(["git", "init", "-q", str(tree)], check=True)

    def commit(message: str) -> str:
        git = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", message], check=True)
        return subprocess.run(
            [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()

    commit("base")
    record(home, tree, at=3)
    commit("turn 3")
    (home / TRANSCRIPT).write_text((home / TRANSCRIPT).read_text() + '{"more": 1}\n')
    record(home, tree, at=5)
    captured = commit("turn 5")
    (tree / "half-written.txt").write_text("a tool of the next turn")
    commit("a side request")
    tip = commit("a tool step")
    assert point_commit(tree / ".git", tip, "b1") == captured


def test_the_sandboxed_cli_writes_its_home_into_the_desks_folder_and_nowhere_else(
    tmp_path: Path,
) -> None:
    tree, home = tmp_path / "tree", tmp_path / "cli-home"
    tree.mkdir()
    home.mkdir()
    script = f"echo $HOME; echo kept > $HOME/session.jsonl; echo lost > {tmp_path}/outside"
    result = run_sandboxed(
        ["/bin/sh", "-c", script],
        cwd=tree,
        env={**sandbox_environment(), "HOME": HOME},
        spec=SandboxSpec().with_home(home),
        timeout_s=60.0,
        max_output_bytes=4000,
    )
    assert result.exit == 0 and result.output() == f"{HOME}\n"
    assert (home / "session.jsonl").read_text() == "kept\n"
    assert not (tmp_path / "outside").exists()  # beside the tree: the sandbox's own /tmp


def test_a_linked_folder_in_the_checkpoint_is_refused_a_linked_work_root_is_not(
    tmp_path: Path,
) -> None:
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "root")  # the work root reached through a link: fine
    home, tree = make_home(tmp_path), tmp_path / "root" / "tree"
    record(home, tree)
    point = load_point(tree, "b1", RESUME, profile="claude-code")
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    restore(point, tree=tree, brief="b1", home=fresh)
    assert (fresh / TRANSCRIPT).exists()

    recorded = state_folder(tree, "b1") / "home" / ".claude"
    moved = tmp_path / "moved"
    recorded.rename(moved)
    os.symlink(moved, recorded)  # the same bytes, reached through a link the forge held
    again = tmp_path / "again"
    again.mkdir()
    with pytest.raises(StateRefused, match="a folder on its path is a link"):
        restore(point, tree=tree, brief="b1", home=again)
    assert not list(again.rglob("*"))


def test_links_a_forged_checkpoint_left_in_the_state_folder_are_never_written_through(
    tmp_path: Path,
) -> None:
    home, tree = make_home(tmp_path), tmp_path / "tree"
    record(home, tree)  # the checkout of a checkpoint someone forged, as pygit2 writes it:
    folder = state_folder(tree, "b1")
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.rmtree(folder / "home" / ".claude")
    os.symlink(outside, folder / "home" / ".claude")  # a folder of the session, a link
    (folder / POINT).unlink()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    os.symlink(victim, folder / POINT)  # the point itself, a link
    (home / TRANSCRIPT).write_text('{"next": "turn"}\n')  # the CLI wrote more
    record(home, tree, at=5)
    assert not list(outside.rglob("*")) and victim.read_text() == "keep me"
    assert not (folder / POINT).is_symlink() and json.loads((folder / POINT).read_text())["at"] == 5
    assert (folder / "home" / TRANSCRIPT).read_text() == '{"next": "turn"}\n'
