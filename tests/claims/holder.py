"""A minimal durable holder for tests: claim, check out, journal steps, push each one.

``python -m tests.claims.holder --forge URL --brief B --desk D --workdir W --status F``

It does what a desk run does at the claim/branch seam and nothing more: acquire the claim
(exit 3 when busy), check out ``assay/<brief>`` from the forge, append a ``takeover``
entry when its fence is newer than the journal's, start a heartbeat (a fenced renewal
exits 4 at once), then for each step write a work file and a journal entry and push them
as one commit (a refused push exits 4; an unreachable forge exits 69). After every pushed
step it rewrites ``--status`` (JSON: pushed steps, tip, fence, holder), so tests poll a
real condition. ``--pace`` spaces the steps out; ``--steps`` bounds them.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

from assay.branch import BranchSync
from assay.claims import ClaimStore, Heartbeat
from assay.errors import AssayError
from assay.forge import open_forge
from assay.journal import JournalWriter, read_journal
from assay.plumbing import Identity


def _write_status(path: Path, status: dict[str, object]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(status))
    os.replace(tmp, path)


def run(args: argparse.Namespace) -> int:
    forge = open_forge(args.forge)
    store = ClaimStore(forge)
    claim = store.acquire(args.brief, args.desk, lease_s=args.lease)
    sync = BranchSync(
        forge,
        args.brief,
        workdir=Path(args.workdir),
        identity=Identity.for_holder(args.desk, claim.holder),
    )
    sync.checkout()
    journal = read_journal(sync.journal_dir) if sync.journal_dir.exists() else None
    writer = JournalWriter.open(sync.journal_dir, journal=journal)
    status: dict[str, object] = {"holder": claim.holder, "fence": claim.fence, "pushed": 0}
    if writer.fence < claim.fence:
        had_entries = writer.seq > 0
        writer.fence = claim.fence
        kind = "takeover" if had_entries else "start"
        writer.append({"kind": kind, "desk": args.desk, "holder": claim.holder})
        status["tip"] = sync.sync(f"{kind} at fence {claim.fence}")
    _write_status(Path(args.status), status)

    def fenced() -> None:
        sys.stderr.write(f"holder {claim.holder[:12]}: fenced by a renewal; stopping\n")
        sys.stderr.flush()
        os._exit(4)

    heartbeat = Heartbeat(store, claim, on_fenced=fenced, journal_head=lambda: writer.head)
    heartbeat.start()
    for step in range(1, args.steps + 1):
        time.sleep(args.pace)  # simulated work between durability points
        work = sync.workdir / "work" / f"{args.desk}-{claim.fence}-{step}.txt"
        work.parent.mkdir(exist_ok=True)
        work.write_text(f"{args.desk} fence {claim.fence} step {step}\n")
        writer.append(
            {
                "kind": "step",
                "step": "compute",
                "name": f"step-{step}",
                "status": "ok",
                "out": {"value": {"holder": claim.holder, "file": work.name}},
            }
        )
        status["tip"] = sync.sync(f"step {step}")
        status["pushed"] = step
        status["head"] = writer.head
        _write_status(Path(args.status), status)
    heartbeat.stop()
    writer.append({"kind": "end", "status": "ok"})
    status["tip"] = sync.sync("end")
    status["done"] = True
    _write_status(Path(args.status), status)
    store.release(claim, done=args.done)
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--forge", required=True)
    parser.add_argument("--brief", required=True)
    parser.add_argument("--desk", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--status", required=True)
    parser.add_argument("--lease", type=float, default=30.0)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--pace", type=float, default=0.0)
    parser.add_argument("--done", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        code = run(args)
    except AssayError as exc:
        sys.stderr.write(f"holder: {exc.status}: {exc.message}\n")
        code = exc.code
    sys.stderr.flush()
    sys.exit(code)


if __name__ == "__main__":
    main()
