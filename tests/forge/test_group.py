"""Group commit (``assay.forge.group``) against real forges: what several pushers on one
host offer goes out in one atomic push per round, a refused unit is answered alone and the
rest sent again, and a pusher killed while it leads a round wedges nothing and loses no
other pusher's unit.

Pushes are counted by a pre-receive hook on the forge (one line per push, its refs), which
can also hold the n-th push until the test lets it go: while it is held, the other
pushers' units pile up in the host's spool.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.forge import Forge, open_forge
from assay.forge.group import GroupPush, check_unit
from assay.plumbing import Identity, PushOutcome, RefUpdate, run_git
from tests.conftest import assay_env
from tests.forge_fixtures import wait_until

ME = Identity("tester", "tester@test.invalid")


def hold_hook(forge_path: Path, *held: int) -> tuple[Path, Path]:
    """A pre-receive hook logging each push's refs (one line a push); it holds each push
    numbered in ``held`` (1-based) until ``<control>/release-<n>`` exists, writing the
    pushing process's id (the round's leader: receive-pack's parent) into
    ``<control>/arrived-<n>``. Returns (log, control)."""
    control = forge_path.parent / "hook"
    control.mkdir()
    log = control / "pushes.log"
    hook = forge_path / "hooks" / "pre-receive"
    hook.write_text(
        f"""#!/usr/bin/env python3
import os, sys, time
refs = [line.split()[2] for line in sys.stdin.read().splitlines() if line.strip()]
with open({str(log)!r}, "a") as out:
    out.write(" ".join(refs) + "\\n")
count = sum(1 for _ in open({str(log)!r}))
if count in {sorted(held)!r}:
    stat = open(f"/proc/{{os.getppid()}}/stat").read()
    leader = stat.rsplit(")", 1)[1].split()[1]
    arrived = os.path.join({str(control)!r}, f"arrived-{{count}}")
    open(arrived + ".tmp", "w").write(leader)
    os.replace(arrived + ".tmp", arrived)
    while not os.path.exists(os.path.join({str(control)!r}, f"release-{{count}}")):
        time.sleep(0.02)
""",
        encoding="utf-8",
    )
    hook.chmod(0o755)
    return log, control


def pushes(log: Path) -> list[set[str]]:
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return [set(line.split()) for line in lines]


def spooled(state: Path) -> list[Path]:
    """The unit files of every group spool under ``state`` (the host's)."""
    return sorted(state.glob("cache/*.group-*/units/*.json"))


def start_pusher(forge: str, ref: str, status: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.forge.group_pusher",
            "--forge",
            forge,
            "--ref",
            ref,
            "--status",
            str(status),
        ],
        env=assay_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def claim_refs(count: int) -> list[str]:
    return [f"refs/assay/claims/g{n}" for n in range(count)]


def test_units_offered_while_a_push_is_out_go_in_one_push(
    forge_path: Path, tmp_path: Path, assay_state: Path
) -> None:
    log, control = hold_hook(forge_path, 1)
    refs = claim_refs(6)
    first = start_pusher(str(forge_path), refs[0], tmp_path / "s0")
    wait_until((control / "arrived-1").exists, timeout=60, what="the first push in the hook")
    rest = [
        start_pusher(str(forge_path), ref, tmp_path / f"s{n}") for n, ref in enumerate(refs[1:], 1)
    ]
    # The first push went at once (nothing else to carry: no unit of its own); the other
    # five pushers' units wait in the spool for its leader lock.
    wait_until(
        lambda: len(spooled(assay_state)) == len(refs) - 1,
        timeout=60,
        what="the other pushers' units in the spool",
    )
    (control / "release-1").touch()
    for proc in [first, *rest]:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    # One push for the first pusher; ONE push for the five that offered while it was out.
    assert pushes(log) == [{refs[0]}, set(refs[1:])]
    listed = run_git(
        ["for-each-ref", "--format=%(refname)", "refs/assay/claims/"], git_dir=forge_path
    )
    assert sorted(listed.stdout.decode().split()) == sorted(refs)
    assert spooled(assay_state) == []  # every unit withdrawn by its pusher


def test_a_leader_killed_in_its_round_loses_no_other_pushers_unit(
    forge_path: Path, tmp_path: Path, assay_state: Path
) -> None:
    """The second push carries three pushers' units; its leader is SIGKILLed while the
    forge holds it. Another pusher leads the next round and the other two units land (if
    the killed round's push landed them already, its CAS finds them at their wants)."""
    log, control = hold_hook(forge_path, 1, 2)
    refs = claim_refs(4)
    status = {ref: tmp_path / ref.rsplit("/", 1)[1] for ref in refs}
    first = start_pusher(str(forge_path), refs[0], status[refs[0]])
    wait_until((control / "arrived-1").exists, timeout=60, what="the first push in the hook")
    procs = {ref: start_pusher(str(forge_path), ref, status[ref]) for ref in refs[1:]}
    wait_until(lambda: len(spooled(assay_state)) == 3, timeout=60, what="three units spooled")
    (control / "release-1").touch()
    _, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    wait_until((control / "arrived-2").exists, timeout=60, what="the second push in the hook")
    assert pushes(log)[1] == set(refs[1:])  # one round carries the three
    leader = int((control / "arrived-2").read_text())
    [killed] = [ref for ref, proc in procs.items() if proc.pid == leader]
    os.kill(leader, signal.SIGKILL)
    procs.pop(killed).communicate(timeout=30)
    (control / "release-2").touch()
    for ref, proc in procs.items():
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, f"{ref}: {err}"
        pushed = json.loads(status[ref].read_text())["commit"]
        at = run_git(["rev-parse", ref], git_dir=forge_path).stdout.decode().strip()
        assert at == pushed  # nothing lost: each live pusher's commit is on the forge
    wait_until(lambda: not spooled(assay_state), timeout=30, what="an empty spool")


@pytest.fixture
def handles(forge_path: Path) -> Iterator[list[Forge]]:
    opened = [open_forge(str(forge_path)) for _ in range(3)]
    try:
        for forge in opened:
            forge.join_group()
        yield opened
    finally:
        for forge in opened:
            forge.close()


def commit(forge: Forge, text: str, parent: str | None = None) -> str:
    return forge.commit(
        {"f": text.encode()}, parents=[parent] if parent else [], message=text, author=ME
    )


def test_units_the_refs_settle_are_answered_without_a_push(
    forge_path: Path, handles: list[Forge]
) -> None:
    """One round holds three units: A's claim was moved by another writer (lost), C's refs
    are already where it wants them (a push whose answer was lost), B is plain. One
    ``ls-refs`` answers A and C; only B is pushed."""
    log, _ = hold_hook(forge_path)
    a, b, c = handles
    base_a = commit(a, "a0")
    a.push([RefUpdate("refs/assay/claims/a", base_a, expected=None)])
    other = commit(a, "a-other", base_a)
    a.push([RefUpdate("refs/assay/claims/a", other, expected=base_a)])  # another writer
    mine = commit(a, "a1", base_a)
    want_c = commit(c, "c1")
    c.push([RefUpdate("refs/assay/claims/c", want_c, expected=None)])  # it landed already
    want_b = commit(b, "b1")
    unit_a = a.unit(a.state_dir, key="a" * 32)
    unit_b = b.unit(b.state_dir, key="b" * 32)
    unit_c = c.unit(c.state_dir, key="c" * 32)
    unit_a.offer(lambda s: [RefUpdate("refs/assay/claims/a", mine, expected=base_a)])
    unit_b.offer(lambda s: [RefUpdate("refs/heads/assay/b", want_b, expected=None)])
    unit_c.offer(lambda s: [RefUpdate("refs/assay/claims/c", want_c, expected=None)])
    before = len(pushes(log))
    state_a = unit_a.flush()
    assert state_a.answer is not None and state_a.answer.outcome == "lost"
    state_b, state_c = unit_b.flush(), unit_c.flush()  # carried by A's round already
    assert not state_b.pending and not state_c.pending
    assert state_b.answer is not None and state_b.answer.outcome == "ok"
    assert pushes(log)[before:] == [{"refs/heads/assay/b"}]
    current = a.ls_refs("refs/")
    assert current["refs/assay/claims/a"] == other  # A's loss moved nothing
    assert current["refs/heads/assay/b"] == want_b
    for unit in (unit_a, unit_b, unit_c):
        unit.withdraw()


def test_a_unit_that_loses_inside_the_push_is_answered_alone_and_the_rest_sent_again(
    forge_path: Path, handles: list[Forge]
) -> None:
    """Another writer moves A's claim at the last instant, while the round's push is in
    the forge (its pre-receive hook): the atomic push is refused whole; receive-pack's
    lock error names A, A hears it lost, and B goes again alone and lands."""
    a, b, _ = handles
    base_a = commit(a, "a0")
    a.push([RefUpdate("refs/assay/claims/a", base_a, expected=None)])
    other = commit(a, "a-other", base_a)
    mine = commit(a, "a1", base_a)
    want_b = commit(b, "b1")
    assert a.push([RefUpdate("refs/keep/other", other, expected=None)]).ok  # its objects
    log = forge_path.parent / "pushes.log"
    hook = forge_path / "hooks" / "pre-receive"
    hook.write_text(
        f"""#!/bin/sh
refs=$(cut -d' ' -f3 | tr '\\n' ' ')
echo "$refs" >> {log}
case "$refs" in *claims/a*)
  env -u GIT_QUARANTINE_PATH git update-ref refs/assay/claims/a {other} {base_a} ;;
esac
exit 0
""",
        encoding="utf-8",
    )
    hook.chmod(0o755)
    unit_a = a.unit(a.state_dir, key="a" * 32)
    unit_b = b.unit(b.state_dir, key="b" * 32)
    unit_a.offer(lambda s: [RefUpdate("refs/assay/claims/a", mine, expected=base_a)])
    unit_b.offer(lambda s: [RefUpdate("refs/heads/assay/b", want_b, expected=None)])
    group = a.group
    assert group is not None
    requests, retried = group.stats.requests, group.stats.retried
    state_a = unit_a.flush()
    assert state_a.answer is not None and state_a.answer.outcome == "lost"
    assert any("is at" in line for line in state_a.answer.errors)
    state_b = unit_b.flush()
    assert not state_b.pending and state_b.answer is not None
    assert [set(line.split()) for line in log.read_text().splitlines()] == [
        {"refs/assay/claims/a", "refs/heads/assay/b"},
        {"refs/heads/assay/b"},
    ]
    assert (group.stats.requests - requests, group.stats.retried - retried) == (2, 1)
    current = a.ls_refs("refs/")
    assert current["refs/assay/claims/a"] == other and current["refs/heads/assay/b"] == want_b
    for unit in (unit_a, unit_b):
        unit.withdraw()


def test_a_one_shot_push_gives_the_outcome_a_push_alone_gives(
    forge_path: Path, handles: list[Forge]
) -> None:
    forge = handles[0]
    first = commit(forge, "one")
    created = forge.push([RefUpdate("refs/assay/claims/x", first, expected=None)])
    assert created.outcome is PushOutcome.CREATED
    again = commit(forge, "two", first)
    moved = forge.push([RefUpdate("refs/assay/claims/x", again, expected=first)])
    assert moved.outcome is PushOutcome.FAST_FORWARD
    stale = forge.push(
        [RefUpdate("refs/assay/claims/x", commit(forge, "3", first), expected=first)]
    )
    assert stale.lost and stale.refs["refs/assay/claims/x"] is PushOutcome.STALE


def test_many_threads_of_one_process_share_rounds(handles: list[Forge]) -> None:
    """Eight threads push while a round is under way (the test holds the leader lock, as a
    round waiting for its budget would): one round carries all eight."""
    forge = handles[0]
    group = forge.group
    assert group is not None
    outcomes: dict[int, PushOutcome] = {}

    def push(n: int) -> None:
        outcomes[n] = forge.push(
            [RefUpdate(f"refs/assay/claims/t{n}", commit(forge, f"t{n}"), expected=None)]
        ).outcome

    threads = [threading.Thread(target=push, args=(n,)) for n in range(8)]
    with group.leading():
        for thread in threads:
            thread.start()
        wait_until(
            lambda: len(list((group.spool / "units").glob("*.json"))) == 8,
            timeout=30,
            what="eight units spooled",
        )
    for thread in threads:
        thread.join(60)
    assert set(outcomes.values()) == {PushOutcome.CREATED} and len(outcomes) == 8
    assert group.stats.requests == 1 and group.stats.units == 8


def test_a_one_shot_that_waited_for_the_lock_and_lost_hears_a_lost_race(
    handles: list[Forge],
) -> None:
    """A push that waited for a round under way, then found nothing else to carry, goes
    by itself; a race it lost there is a lost race to its caller (a claim's acquire reads
    it as Busy), never a refusal."""
    forge = handles[0]
    group = forge.group
    assert group is not None
    first = commit(forge, "one")
    assert forge.push([RefUpdate("refs/assay/claims/race", first, expected=None)]).ok
    stale = commit(forge, "two")
    answers = []
    pushing = threading.Thread(
        target=lambda: answers.append(
            forge.push([RefUpdate("refs/assay/claims/race", stale, expected=None)])
        )
    )
    with group.leading():  # a round under way: the push waits in the spool
        pushing.start()
        wait_until(
            lambda: len(list((group.spool / "units").glob("*.json"))) == 1,
            timeout=30,
            what="the push's unit spooled",
        )
    pushing.join(60)
    [answer] = answers
    assert answer.lost and answer.refs["refs/assay/claims/race"].lost, answer


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        json.dumps(
            {
                "v": 1,
                "key": "f" * 32,
                "pid": 1,
                "git_dir": "/",
                "seq": 1,
                "refs": [{"ref": "refs/heads/../x", "base": None, "want": "0" * 40}],
                "hidden": [],
                "flight": None,
                "answer": None,
            }
        ).encode(),
        json.dumps(
            {
                "v": 1,
                "key": "f" * 32,
                "pid": os.getpid(),
                "git_dir": "/nowhere",
                "seq": 1,
                "refs": [{"ref": "refs/heads/main", "base": None, "want": "1" * 40}],
                "hidden": [],
                "flight": None,
                "answer": None,
            }
        ).encode(),
        b"x" * 70_000,
    ],
    ids=["garbage", "bad-ref", "no-objects", "huge"],
)
def test_a_hostile_unit_file_stops_nobody(
    forge_path: Path, handles: list[Forge], content: bytes
) -> None:
    """A unit file the round cannot read is dropped; one it can read but whose objects are
    nowhere is answered "alone" (its owner would push it itself). Others' pushes land, and
    nothing the hostile file names moves."""
    forge = handles[0]
    group = forge.group
    assert group is not None
    hostile = group.spool / "units" / f"{'f' * 32}.json"
    hostile.write_bytes(content)
    main = forge.ls_refs("refs/heads/")["refs/heads/main"]
    result = forge.push([RefUpdate("refs/assay/claims/ok", commit(forge, "ok"), expected=None)])
    assert result.ok
    assert forge.ls_refs("refs/heads/")["refs/heads/main"] == main
    if hostile.exists():  # readable: answered alone, never pushed
        said = check_unit(json.loads(hostile.read_bytes()), "f" * 32)
        assert said["answer"]["outcome"] in ("alone", "lost")  # never pushed: main named


def test_a_forge_git_pushes_to_is_pushed_alone(tmp_path: Path, forge_path: Path) -> None:
    """No in-process transport (a ``git://`` forge): every unit is its owner's own push."""
    from tests.forge_fixtures import serve_daemon

    served = serve_daemon(forge_path)
    try:
        with open_forge(served.url) as forge:
            group = forge.join_group()
            assert group.transport is None
            first = commit(forge, "d1")
            assert forge.push([RefUpdate("refs/assay/claims/d", first, expected=None)]).ok
            unit = forge.unit(forge.state_dir, key="d" * 32)
            second = commit(forge, "d2", first)
            unit.offer(lambda s: [RefUpdate("refs/assay/claims/d", second, expected=first)])
            state = unit.flush()
            assert not state.pending and state.answer is not None
            assert state.answer.outcome == "ok"
            assert forge.ls_refs("refs/assay/")["refs/assay/claims/d"] == second
            unit.withdraw()
    finally:
        served.stop()


def test_the_spool_belongs_to_its_url_and_credential(tmp_path: Path, forge_path: Path) -> None:
    """Pushers with another token are in another group: a round pushes with its leader's
    credentials, so it never carries a unit another credential offered."""
    from assay.forge.base import Forge as Plain

    url = f"file://{forge_path}"
    one = Plain(url, cache_dir=tmp_path / "cache")
    two = Plain(url, cache_dir=tmp_path / "cache", config={"http.extraHeader": "A: b"})
    try:
        assert GroupPush.for_forge(one).spool != GroupPush.for_forge(two).spool
        assert "A: b" not in str(GroupPush.for_forge(two).spool)
        assert GroupPush.for_forge(one).spool == GroupPush.for_forge(one).spool
    finally:
        one.close()
        two.close()
