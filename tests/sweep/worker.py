"""A small desk process the sweeper tests control: real claims, branch sync and journal.

``python -m tests.sweep.worker --forge URL --brief B --workdir DIR [--block] [--wait]``
acquires the claim with the real ``ClaimStore`` (a short lease, renewed by the real
``Heartbeat``), checks out ``assay/B`` with ``BranchSync`` and runs a durable flow through
the real runtime, pushing the journal at every durability point:

- ``plan`` and ``write`` tool steps, then ``slow``: with ``--block`` the ``slow`` step never
  returns, so the test can SIGKILL the process mid-run; a resumed worker replays ``plan``
  and ``write`` from the journal and runs ``slow`` again;
- with ``--wait`` the flow waits for an approval after ``write``: the process marks its claim
  ``waiting`` and exits 75 holding nothing; a worker started later resumes past the wait
  once an ``approve`` event is on ``refs/assay/events/B``.

It prints ``ready`` once ``write`` is durable on the forge. Exit codes are DESIGN §8's.
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path
from typing import Any

from assay.branch import BranchSync
from assay.claims.heartbeat import Heartbeat
from assay.claims.store import ClaimStore
from assay.desks.records.events import EventLog
from assay.errors import AssayError
from assay.forge import open_forge
from assay.plumbing import Identity
from assay.runtime import Event, execute

DESK = "tester"


def read_events(forge: Any, brief: str) -> list[Event]:
    """Every event on the brief's events ref, as the desk loop reads them."""
    return EventLog(forge, brief).read()


class Hooks:
    def __init__(self, store: ClaimStore, claim: Any, sync: BranchSync, forge: Any, brief: str):
        self.store, self.claim, self.sync, self.forge, self.brief = store, claim, sync, forge, brief

    def durability_point(self, reason: str) -> None:
        self.sync.sync(f"journal: {reason}")

    def heartbeat(self, progress: dict[str, Any]) -> None:
        self.store.renew(self.claim)

    def ensure_owner(self) -> None:
        self.store.ensure_owner(self.claim)

    def events(self) -> list[Event]:
        return read_events(self.forge, self.brief)


# How this process behaves; deliberately not the run's input, which must be the same for the
# process that resumes the run as for the one that started it.
OPTIONS = {"block": False, "wait": False}


def flow(run: Any, options: dict[str, Any]) -> str:
    run.step("plan", lambda: {"files": ["a.txt"]}, kind="tool")
    run.step("write", lambda: "written", kind="tool")
    print("ready", flush=True)
    if OPTIONS["wait"]:
        run.wait_for("approval")
    if OPTIONS["block"]:
        run.step("slow", threading.Event().wait, kind="tool")  # never returns: killed here
    run.step("slow", lambda: "fast this time", kind="tool")
    return "finished"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--forge", required=True)
    parser.add_argument("--brief", required=True)
    parser.add_argument("--workdir", required=True, type=Path)
    parser.add_argument("--lease", type=float, default=1.5)
    parser.add_argument("--block", action="store_true")
    parser.add_argument("--wait", action="store_true")
    args = parser.parse_args(argv)
    OPTIONS.update(block=args.block, wait=args.wait)
    try:
        forge = open_forge(args.forge)
        store = ClaimStore(forge, skew_s=0)
        claim = store.acquire(args.brief, DESK, lease_s=args.lease, allow_waiting=True)
        sync = BranchSync(
            forge, args.brief, workdir=args.workdir, identity=Identity.for_holder(DESK, "w")
        )
        sync.checkout()
        hooks = Hooks(store, claim, sync, forge, args.brief)
        with Heartbeat(store, claim, on_fenced=lambda: None):
            result = execute(
                flow,
                {"brief": args.brief},
                journal_dir=sync.journal_dir,
                fence=claim.fence,
                hooks=hooks,
            )
        if result.status == "suspended":
            store.set_waiting(claim, result.waiting_for or "approval")
        elif result.status == "ok":
            store.release(claim, done=True)
        else:
            store.release(claim)
        print(result.status, flush=True)
        return result.code
    except AssayError as error:
        print(f"{error.status}: {error.message}", file=sys.stderr, flush=True)
        return error.code


if __name__ == "__main__":
    sys.exit(main())
