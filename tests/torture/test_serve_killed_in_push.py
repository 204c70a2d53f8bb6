"""``assay forge serve`` SIGKILLed while a push is inside ``git receive-pack`` or the hook.

The server starts ``receive-pack --stateless-rpc`` itself on a forge with a hook that acts
before the refs move (and takes the push in process on one whose only hook is
``post-receive``, which it then runs itself). A hook in the forge holds one
step push of a running desk at a chosen stage of ``receive-pack`` (``tests.torture.
held_push``: a real condition, no timing), the test SIGKILLs the server there, restarts it
on the same port, and the desk, retrying its push, carries on:

- every ref of the held push is at its old value or all are at their new value, never a
  mix (a push is atomic) and never anything else;
- the desk finishes its run without being restarted, and each model turn was paid once
  (the scripted model's call log);
- every invariant of the crash torture holds, and ``git fsck`` passes.

Two ways to die: the server's whole process group (its ``receive-pack`` and hook die with
it, as under a service manager), or the server process alone (its ``receive-pack`` lives
on, finishes the push and finds nobody to report to).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from assay.claims import ClaimRecord, ClaimStore
from assay.forge import open_forge
from tests.forge_fixtures import wait_until
from tests.torture.fleet import Fleet, invariant_problems
from tests.torture.held_push import Held, HeldPush, read_ref
from tests.torture.test_forge_faults import fsck, stopped_cleanly

# Long enough to ride out the restart on a loaded machine; a lost race is never retried.
PATIENT = {"ASSAY_FORGE_RETRIES": "30", "ASSAY_FORGE_RETRY_SECONDS": "90"}


def refs_now(fleet: Fleet, refs: dict[str, tuple[str, str]]) -> str:
    """``old`` or ``new`` when every ref of the push agrees; else what each ref is."""
    zero = "0" * 40
    seen = {ref: read_ref(fleet.forge_path, ref) or zero for ref in refs}
    for side, index in (("old", 0), ("new", 1)):
        if all(seen[ref] == pair[index] for ref, pair in refs.items()):
            return side
    return f"torn: {seen} against {refs}"


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def paid_turns(log: Path) -> Counter[tuple[str, int]]:
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return Counter((call["brief"], call["turn"]) for call in map(json.loads, lines))


@pytest.mark.parametrize(
    ("stage", "kill", "nth", "expected"),
    [
        ("pre-receive", "group", 1, "old"),  # the branch's creation (the first model step)
        # The lock the killed transaction left is removed by the restarted server.
        ("reference-transaction", "group", 2, "old"),
        ("post-receive", "group", 2, "new"),
        # The orphan moves the refs, unless git's receive.keepAlive packet (after 5 s
        # without output) finds the dead server's pipe first: SIGPIPE, the refs stay old.
        ("pre-receive", "server", 2, "old or new"),
    ],
)
def test_server_killed_inside_receive_pack(
    tmp_path: Path, stage: str, kill: str, nth: int, expected: str
) -> None:
    fleet = Fleet(tmp_path, ["s0"], lease=3)
    fleet.setup()
    held = HeldPush.install(fleet.forge_path, stage=stage)
    fleet.serve()
    calls = tmp_path / "model-calls.jsonl"
    try:
        held.arm(nth)
        desk = fleet.start_desk(
            "--once", machine="a", env={**PATIENT, "ASSAY_MODEL_CALL_LOG": str(calls)}
        )
        inside = held.wait_held()
        assert fleet.server is not None
        if stage == "post-receive":
            # A forge whose only hook is post-receive: the server took the push itself
            # (assay.forge.receivepack) and runs the hook, the refs already moved.
            receive_pack = inside.hook_pid
            assert parent_of(inside.hook_pid) == fleet.server.pid
        else:
            receive_pack = parent_of(inside.hook_pid)
            assert parent_of(receive_pack) == fleet.server.pid
        assert refs_now(fleet, inside.refs) == ("new" if stage == "post-receive" else "old")

        fleet.kill_server(alone=kill == "server")
        if kill == "server":
            held.release()  # the orphaned receive-pack goes on alone
            wait_until(lambda: gone(receive_pack), timeout=60, what="the orphan to finish")
        wait_until(lambda: gone(inside.hook_pid), timeout=30, what="the hook to end")
        assert refs_now(fleet, inside.refs) in expected.split(" or ")
        fleet.serve()  # the same port: the desk's retries find it again

        fleet.wait_all(timeout=180)
        stopped_cleanly(fleet)
        assert desk.code == 0, desk.log.read_text(encoding="utf-8", errors="replace")
        assert_finished_once(fleet, calls)
    finally:
        held.release()
        fleet.stop()


def assert_finished_once(fleet: Fleet, calls: Path, *, repaid: int = 0) -> None:
    """Every torture invariant, each model turn paid once (``repaid`` of them twice), and
    a sound repository."""
    problems = invariant_problems(fleet, fleet.inspect())
    assert not problems, "\n".join(problems)
    paid = paid_turns(calls)
    answers = fleet.model_answers()
    assert len(paid) == answers, paid
    assert sorted(paid.values()) == [1] * (answers - repaid) + [2] * repaid, paid
    fsck(fleet)


def claim_lapsed(fleet: Fleet, brief: str) -> bool:
    with open_forge(str(fleet.forge_path), cache_dir=fleet.root / "watch-cache") as forge:
        store = ClaimStore(forge, skew_s=0)
        record = store.get(brief)
        return record is not None and store.status(record) == "expired"


def kill_desk_inside(
    fleet: Fleet, held: HeldPush, outcome: str, *, nth: int, env: dict[str, str]
) -> Held:
    """Start a desk, SIGKILL it (its whole process group) once its ``nth`` matching push is
    held in the forge, then let the forge apply that push (``applied``: the ref is new) or
    kill the server before any ref moved and restart it (``lost``: the ref is old)."""
    held.arm(nth)
    desk = fleet.start_desk("--once", machine="a", env=env)
    inside = held.wait_held()
    receive_pack = parent_of(inside.hook_pid)
    fleet.kill(desk)
    if outcome == "applied":
        held.release()
        wait_until(lambda: gone(receive_pack), timeout=60, what="the push to finish")
        assert refs_now(fleet, inside.refs) == "new"
    else:
        fleet.kill_server()
        assert refs_now(fleet, inside.refs) == "old"
        fleet.serve()
    return inside


@pytest.mark.parametrize(
    ("outcome", "resume_on"),
    [("applied", "b"), ("lost", "a")],
)
def test_desk_killed_inside_its_push(tmp_path: Path, outcome: str, resume_on: str) -> None:
    """The desk dies with a step's push in flight (held in the forge's pre-receive hook).

    ``applied``: the forge finishes the push after the pusher is gone (the ref is new);
    ``lost``: the server dies too, before any ref moved (the ref is old). The run resumes
    from the forge after the lease lapses, on another machine or the same one (nothing
    local is trusted), and finishes with each model turn paid once, except the one model
    step the lost push carried: that call is paid again (the documented durability point:
    the last pushed checkpoint), and only that one.

    The desk's whole process group is killed, whatever ``Forge.push`` runs inside it.
    """
    fleet = Fleet(tmp_path, ["p0"], lease=3)
    fleet.setup()
    held = HeldPush.install(fleet.forge_path, stage="pre-receive")
    fleet.serve()
    calls = tmp_path / "model-calls.jsonl"
    env = {"ASSAY_MODEL_CALL_LOG": str(calls)}
    try:
        kill_desk_inside(fleet, held, outcome, nth=2, env=env)
        claim = next(r for r in claims_of(fleet) if r.brief == "p0")
        assert (claim.state, claim.fence) == ("held", 1), claim  # the dead desk's, until it lapses
        wait_until(lambda: claim_lapsed(fleet, "p0"), timeout=60, what="the lease to lapse")

        resumed = fleet.start_desk("--once", machine=resume_on, env=env)
        fleet.wait_all(timeout=180)
        assert resumed.code == 0, resumed.log.read_text(encoding="utf-8", errors="replace")
        assert_finished_once(fleet, calls, repaid=int(outcome == "lost"))
        assert fleet.inspect()["p0"].fence == 2
    finally:
        held.release()
        fleet.stop()


def claims_of(fleet: Fleet) -> list[ClaimRecord]:
    with open_forge(str(fleet.forge_path), cache_dir=fleet.root / "watch-cache") as forge:
        return ClaimStore(forge).list()


@pytest.mark.parametrize("outcome", ["applied", "lost"])
def test_desk_killed_inside_its_settle_push(tmp_path: Path, outcome: str) -> None:
    """The one atomic push of the review and the claim's settlement, held in the forge's
    pre-receive hook while the desk is killed: the forge applies both refs or neither, and
    the run is finished or resumable, each model turn paid once."""
    fleet = Fleet(tmp_path, ["v0"], lease=3)
    fleet.setup()
    held = HeldPush.install(
        fleet.forge_path, stage="pre-receive", match="refs/assay/reviews/", unless=None
    )
    fleet.serve()
    calls = tmp_path / "model-calls.jsonl"
    env = {"ASSAY_MODEL_CALL_LOG": str(calls)}
    try:
        inside = kill_desk_inside(fleet, held, outcome, nth=1, env=env)
        assert {"refs/assay/claims/v0", "refs/assay/reviews/v0"} <= set(inside.refs)
        if outcome == "applied":
            assert_finished_once(fleet, calls)  # nothing left to resume
            assert fleet.inspect()["v0"].fence == 1
            return
        result = fleet.inspect()["v0"]
        assert (result.claim_state, result.review) == ("held", None)
        wait_until(lambda: claim_lapsed(fleet, "v0"), timeout=60, what="the lease to lapse")
        resumed = fleet.start_desk("--once", machine="b", env=env)
        fleet.wait_all(timeout=180)
        assert resumed.code == 0, resumed.log.read_text(encoding="utf-8", errors="replace")
        assert_finished_once(fleet, calls)
        assert fleet.inspect()["v0"].fence == 2
    finally:
        held.release()
        fleet.stop()
