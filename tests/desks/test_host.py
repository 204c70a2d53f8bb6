"""The warm desk host (``assay desk host``) and the settle push, with real processes.

The host is a real ``python -m assay desk host`` woken by the forge's real post-receive
hook through its Unix socket; children are real forks, SIGKILLed with their host. The
single atomic push that writes the review and settles the claim is interrupted by SIGKILL
before and after the forge applied it, through a ``git`` wrapper first on the desk's PATH
that waits on a FIFO (a real condition) at that moment.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from assay.desks.host.resident import parse_wake
from assay.sweep.hook import install_wake_hook
from tests.conftest import assay_argv
from tests.desks.world import World, brief_text, finish, write
from tests.forge_fixtures import wait_until
from tests.torture.held_push import HeldPush

PY_DESK = """\
import os
from pathlib import Path


def work(run, brief):
    run.wait_for("approval")

    def body():
        marks = Path(os.environ["HOST_TEST_DIR"])
        (marks / f"{brief.id}.{os.getpid()}").write_text("")
        if not (marks / "release").exists():
            with open(marks / "gate.fifo") as gate:  # blocks: nobody opens the other end
                gate.read()
        return {"ok": True}

    run.step("work", body)
    return {"status": "done", "summary": "worked", "evidence": []}
"""


def start_host(
    world: World, sock: Path, *args: str, extra: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    proc = world.start(
        "desk",
        "host",
        "--forge",
        world.url,
        "--desks",
        str(world.desks),
        "--socket",
        str(sock),
        *args,
        machine="host",
        extra=extra,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == str(sock)  # it listens once it says where
    return proc


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return status.exists() and status.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_the_hook_wakes_a_waiting_run_through_the_warm_host(world: World, tmp_path: Path) -> None:
    world.add_briefs(brief_text("b1", labels=["approval"]))
    world.add_desk("coder", [write("hello.txt", "hi\n"), finish("ready for review")])
    sock = tmp_path / "host.sock"
    install_wake_hook(world.forge_path, workdir=tmp_path, host_socket=sock)
    waiting = world.desk("coder", "--once")
    assert waiting.returncode == 75, waiting.stderr
    start_host(world, sock)

    world.event("b1", "approve", actor="ann")
    wait_until(
        lambda: (world.claim("b1") or None) and world.claim("b1").state == "done",  # type: ignore[union-attr]
        timeout=90,
        what="the host's child to finish the woken run",
    )
    wakes = [e for e in world.journal("b1").entries if e["kind"] == "wake"]
    assert [w["event"]["kind"] for w in wakes] == ["approve"]
    review = world.review("b1")
    assert review is not None and review.state == "ready"
    log = sock.with_suffix(".log").read_text()
    assert "woke b1: ok (0)" in log
    # The hook told the host; it started no waker process of its own.
    assert not (world.forge_path / "assay-wake.log").exists()


def add_waiting_py_desk(world: World, briefs: tuple[str, ...], source: str = PY_DESK) -> None:
    """The python desk ``py`` (``source``), its run on each of ``briefs`` waiting for approval."""
    world.add_briefs(*(brief_text(b) for b in briefs))
    (world.desks / "pydesk.py").write_text(source, encoding="utf-8")
    (world.desks / "py.yaml").write_text(
        "name: py\nkind: python\nentry: pydesk:work\nlease: 1.5\ntakes: {globs: ['*']}\n",
        encoding="utf-8",
    )
    for _ in briefs:
        waiting = world.assay(*world.desk_args("py", "--once"))
        assert waiting.returncode == 75, waiting.stderr


def host_place(world: World, tmp_path: Path) -> tuple[Path, dict[str, str], Path]:
    """The desk's marks folder, the environment naming it, and the host's socket, which
    the forge's wake hook is installed to write to."""
    marks = tmp_path / "marks"
    marks.mkdir()
    sock = tmp_path / "host.sock"
    install_wake_hook(world.forge_path, workdir=tmp_path, host_socket=sock)
    return marks, {"HOST_TEST_DIR": str(marks)}, sock


def test_the_host_sigkilled_with_children_running_leaves_every_run_resumable(
    world: World, tmp_path: Path
) -> None:
    briefs = ("b1", "b2")
    add_waiting_py_desk(world, briefs)
    marks, extra, sock = host_place(world, tmp_path)
    os.mkfifo(marks / "gate.fifo")
    host = start_host(world, sock, extra=extra)
    for brief in briefs:
        world.event(brief, "approve", actor="ann")

    def started() -> dict[str, int]:
        found = {p.name.split(".")[0]: int(p.name.split(".")[1]) for p in marks.glob("b*.*")}
        return found if len(found) == len(briefs) else {}

    children = wait_until(started, timeout=90, what="both woken runs inside their step")
    for brief in briefs:
        claim = world.claim(brief)
        assert claim is not None and (claim.state, claim.fence) == ("held", 2)

    os.kill(host.pid, signal.SIGKILL)  # the host alone: its children must die with it
    host.wait(timeout=30)
    wait_until(
        lambda: not any(alive(pid) for pid in children.values()),
        timeout=30,
        what="the host's children to die with it",
    )
    (marks / "release").write_text("")
    for brief in briefs:
        wait_until(lambda b=brief: world.claim_expired(b), timeout=60, what="the lease to lapse")
        resumed = world.assay(
            *world.desk_args("py", "--brief", brief, "--once"), machine="b", extra=extra
        )
        assert resumed.returncode == 0, resumed.stderr
        claim = world.claim(brief)
        assert claim is not None and (claim.state, claim.fence) == ("done", 3)
        entries = world.journal(brief).entries
        fences = [e["fence"] for e in entries]
        # fence 2 (the killed child) may have pushed nothing; the order never goes back
        assert fences == sorted(fences) and (fences[0], fences[-1]) == (1, 3)
        assert sum(e["kind"] == "start" for e in entries) == 1
        works = [e for e in entries if e["kind"] == "step" and e.get("name") == "work"]
        assert len(works) == 1 and works[0]["fence"] == 3  # the killed child recorded none


# PY_DESK with a paid effect first: it stands for a model call (a durability point, pushed
# before the next step), and appends a line to ``paid`` each time its body runs.
PAID_DESK = PY_DESK.replace(
    '    run.step("work", body)',
    """    def pay(key):
        with open(Path(os.environ["HOST_TEST_DIR"]) / "paid", "a") as paid:
            paid.write(key + "\\n")
        return {"paid": key}

    run.effect("pay", pay)
    run.step("work", body)""",
)


def children_of(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in path.read_text().split()] if path.exists() else []


def send_wake(sock: Path, brief: str) -> None:
    """What the forge's hook writes to the host's socket."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.connect(str(sock))
        client.sendall(f"wake {brief}\n".encode())


class HostLines:
    """The host's stderr lines (``wake B: child P``, ``woke B: child P exited C``), read
    by a thread so the test can wait on them."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        assert proc.stderr is not None
        self._stream = proc.stderr
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        with contextlib.suppress(ValueError, OSError):  # the test closed the pipe: done
            for line in self._stream:
                self.lines.append(line)

    def exited(self, pid: int) -> str | None:
        found = [line for line in self.lines if f"child {pid} exited" in line]
        return found[-1].strip() if found else None

    def children(self, brief: str) -> list[int]:
        return [int(line.split()[-1]) for line in self.lines if line.startswith(f"wake {brief}:")]


def paid(marks: Path) -> list[str]:
    path = marks / "paid"
    return path.read_text().split() if path.exists() else []


def test_a_child_killed_before_it_claims_leaves_the_run_waiting_for_a_fresh_host(
    world: World, tmp_path: Path
) -> None:
    add_waiting_py_desk(world, ("b1",), PAID_DESK)
    marks, extra, sock = host_place(world, tmp_path)
    (marks / "release").write_text("")
    log = marks / "children.log"
    os.mkfifo(log)  # a child opens its log first: it blocks there, right after the fork
    host = start_host(world, sock, "--log", str(log), extra=extra)
    lines = HostLines(host)

    world.event("b1", "approve", actor="ann")
    (child,) = wait_until(lambda: children_of(host.pid), timeout=90, what="the forked child")
    os.kill(child, signal.SIGKILL)
    wait_until(lambda: lines.exited(child), timeout=30, what="the host to reap its child")
    assert lines.exited(child) == f"woke b1: child {child} exited -9"
    assert alive(host.pid)  # a child's death is not the host's
    claim = world.claim("b1")
    assert claim is not None and (claim.state, claim.fence) == ("waiting", 1)  # not taken
    assert paid(marks) == []

    world.kill(host)  # a fresh host, as after a reboot, wakes the same run
    log.unlink()
    host = start_host(world, sock, "--log", str(log), extra=extra)
    send_wake(sock, "b1")
    wait_until(
        lambda: (world.claim("b1") or None) and world.claim("b1").state == "done",  # type: ignore[union-attr]
        timeout=90,
        what="the fresh host's child to finish the run",
    )
    claim = world.claim("b1")
    assert claim is not None and claim.fence == 2
    assert len(paid(marks)) == 1
    entries = world.journal("b1").entries
    assert sum(e["kind"] == "start" for e in entries) == 1
    assert [e["event"]["kind"] for e in entries if e["kind"] == "wake"] == ["approve"]


def test_a_child_killed_mid_run_is_not_doubled_by_the_next_wake_and_resumes(
    world: World, tmp_path: Path
) -> None:
    add_waiting_py_desk(world, ("b1",), PAID_DESK)
    marks, extra, sock = host_place(world, tmp_path)
    os.mkfifo(marks / "gate.fifo")
    host = start_host(world, sock, extra=extra)
    lines = HostLines(host)

    world.event("b1", "approve", actor="ann")
    mark = wait_until(lambda: list(marks.glob("b1.*")), timeout=90, what="the child in its step")
    child = int(mark[0].name.split(".")[1])
    assert child in children_of(host.pid)
    os.kill(child, signal.SIGKILL)  # the child alone, inside its run
    wait_until(lambda: lines.exited(child), timeout=30, what="the host to reap its child")
    assert alive(host.pid)
    claim = world.claim("b1")
    assert claim is not None and (claim.state, claim.fence) == ("held", 2)
    assert len(paid(marks)) == 1

    # Another wake while the dead child's lease is live: the host forks, the child finds
    # the claim held (not waiting) and leaves it alone.
    send_wake(sock, "b1")
    second = wait_until(
        lambda: [p for p in lines.children("b1") if p != child], timeout=90, what="a 2nd child"
    )[0]
    wait_until(lambda: lines.exited(second), timeout=90, what="the second child to end")
    assert lines.exited(second) == f"woke b1: child {second} exited 0"
    claim = world.claim("b1")
    assert claim is not None and (claim.state, claim.fence) == ("held", 2)

    (marks / "release").write_text("")
    wait_until(lambda: world.claim_expired("b1"), timeout=60, what="the lease to lapse")
    resumed = world.assay(
        *world.desk_args("py", "--brief", "b1", "--once"), machine="b", extra=extra
    )
    assert resumed.returncode == 0, resumed.stderr
    claim = world.claim("b1")
    assert claim is not None and (claim.state, claim.fence) == ("done", 3)
    assert len(paid(marks)) == 1  # the pushed effect was not run again
    entries = world.journal("b1").entries
    works = [e for e in entries if e["kind"] == "step" and e.get("name") == "work"]
    assert len(works) == 1 and works[0]["fence"] == 3
    assert [e["fence"] for e in entries] == sorted(e["fence"] for e in entries)


@pytest.mark.parametrize("moment", ["before", "after"])
def test_a_desk_killed_inside_its_settle_push_leaves_claim_and_review_together(
    world: World, moment: str
) -> None:
    """The push that carries the review ref is held in the forge's own hook: ``before`` in
    ``pre-receive`` (the forge's receive-pack, started by the desk, holds it: no ref has
    moved), ``after`` in ``post-receive`` (the refs have moved; the desk took the push in
    process and runs the hook itself). The desk's whole process group is killed there."""
    world.add_briefs(brief_text("b1"))
    world.add_desk("coder", [write("a.txt", "a\n"), finish("done")], lease=1.5)
    stage = "pre-receive" if moment == "before" else "post-receive"
    held = HeldPush.install(world.forge_path, stage=stage, match="refs/assay/reviews/", unless=None)
    held.arm(1)
    desk = subprocess.Popen(
        assay_argv(*world.desk_args("coder", "--once")),
        cwd=world.root,
        env=world.env("a"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        inside = held.wait_held(timeout=90)
        assert "refs/assay/reviews/b1" in inside.refs
        os.killpg(desk.pid, signal.SIGKILL)
        desk.wait(timeout=30)
    finally:
        held.release()
    (world.forge_path / "hooks" / stage).unlink()  # the resumed desk pushes unheld

    claim, review = world.claim("b1"), world.review("b1")
    assert claim is not None
    if moment == "before":  # nothing of the push landed: held, no review
        assert claim.state == "held" and review is None
        wait_until(lambda: world.claim_expired("b1"), timeout=60, what="the lease to lapse")
        resumed = world.desk("coder", "--once", machine="b")
        assert resumed.returncode == 0, resumed.stderr
        claim, review = world.claim("b1"), world.review("b1")
        assert claim is not None and (claim.state, claim.fence) == ("done", 2)
    else:  # the forge applied both refs at once, whatever the desk saw afterwards
        assert claim.state == "done" and claim.fence == 1
    assert review is not None and review.state == "ready"
    assert claim.journal_head == world.journal("b1").head


@pytest.mark.parametrize(
    "line",
    [
        b"wake ../../etc",
        b"wake b1; rm -rf /",
        b"wake $(id)",
        b"wake",
        b"wake b1 b2",
        b"sleep b1",
        b"wake .hidden",
        b"wake \xff\xfe",
    ],
)
def test_a_wake_line_that_is_not_one_brief_id_is_ignored(line: bytes) -> None:
    assert parse_wake(line) is None


def test_a_wake_line_names_one_brief() -> None:
    assert parse_wake(b"wake b-1.x_2\n") == "b-1.x_2"
