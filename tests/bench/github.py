"""Benchmark: what Assay costs on GitHub, measured against the fake GitHub on loopback.

Prints, for a number of whole brief lifecycles (issue -> the events job accepting its text
-> claim -> the desk job's sync (label, comment and the ready pull request in one GraphQL
request; the gate dispatched) -> check run -> approval comment and the events job reading
it -> merge -> the sweep's liveness check), the REST/GraphQL requests charged per lifecycle
and per phase, the writes, calls made by claims and heartbeats (0), the wall time of each
phase, and the cost of quiet polls (ETag 304s).

    python -m tests.bench.github            # short default (a few lifecycles)
    python -m tests.bench.github --briefs 20 --polls 200
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import httpx

from assay.branch import BranchSync
from assay.claims import ClaimStore
from assay.desks.records.review import write_review
from assay.evidence.keys import gate_key
from assay.evidence.rule import MergeDecision, RowStatus, Verdict
from assay.forge import Identity, open_forge
from assay.forge.budget import WINDOW_ENV
from assay.github.events import collect_events
from assay.github.forge import GitHubForge
from assay.github.issues import issue_briefs
from assay.github.mirror import GitHubMirror, review_body
from assay.github.sync import dispatch_answered, sync
from tests.github.fake_github import BOT, TEST_WINDOW_S, FakeGitHub

# What one events poll reads for every brief at once: the open issues, the open pull
# requests, the comments since the cursor.
POLL_LISTS = frozenset({"/issues", "/pulls", "/issues/comments"})
PHASES = ("accept", "desk", "gate", "events", "woken", "merge", "liveness")
# The lifecycles measured: a brief that needs no approval (its gate's pass merges it), one
# a maintainer approves anyway with an `/assay approve` comment (the lifecycle this
# benchmark measured before: the comment read by the events job, nothing else follows), and
# one labelled `approval` (its desk waits; the approval wakes the desk and re-gates it).
KINDS = ("plain", "commented", "approval")
GATE_WORKFLOW = (
    "on:\n  workflow_dispatch:\n    inputs:\n      brief: {required: true}\n"
    "      sha: {required: false}\njobs: {}\n"
)
DESK_WORKFLOW = (
    "on:\n  workflow_dispatch:\n    inputs:\n      desk: {required: false}\n"
    "      brief: {required: false}\njobs: {}\n"
)
WORKFLOWS = {
    ".github/workflows/assay-gate.yml": GATE_WORKFLOW,
    ".github/workflows/assay-desk.yml": DESK_WORKFLOW,
}


def _lifecycle(
    fake: FakeGitHub,
    forge: GitHubForge,
    people: httpx.Client,
    index: int,
    work: Path,
    kind: str = "commented",
) -> dict[str, float]:
    """One brief of ``kind`` (``KINDS``) from its issue to its merge, as the shipped
    workflows run it; the requests the bot was charged (``<phase> charged``), of which
    writes (``writes``) and the events polls' shared lists (``poll lists``), the requests
    sent (``sent``: 304s too, what a runner with a cold cache would pay), and wall times."""
    brief = f"bench-{kind}-{index}"
    timings: dict[str, float] = defaultdict(float)
    start, first = time.perf_counter(), len(fake.calls)
    issue = people.post(
        "/repos/acme/widgets/issues",
        json={
            "title": f"Bench {index}",
            "body": f"---\nid: {brief}\nverify:\n  - id: unit\n    run: 'true'\n---\nBench.\n",
            "labels": ["assay", "approval"] if kind == "approval" else ["assay"],
        },
    ).json()["number"]
    store, mirror = ClaimStore(forge), GitHubMirror(forge)

    def phase(name: str, began: float, charged: int) -> None:
        timings[f"{name} s"] += time.perf_counter() - began
        timings[f"{name} charged"] += fake.charged(BOT) - charged

    # The events job (on the maintainer's label): the text becomes the brief.
    mark, charged = time.perf_counter(), fake.charged(BOT)
    collect_events(forge)
    phase("accept", mark, charged)
    # On GitHub the desk's job runs minutes after the events job, and GitHub stamps whole
    # seconds: what the desk's sync changes on the issue must be later than the maintainer's
    # label, as it is there (the next events poll reads the issue's timeline again for it).
    time.sleep(1.1)

    # The desk job: the brief listed, claimed (git), worked, and its review ready (its run
    # done, or waiting for approval); then the job's sync and its gate job's dispatch.
    mark, charged = time.perf_counter(), fake.charged(BOT)
    listed = issue_briefs(forge)
    assert brief in listed.briefs, listed.errors
    claim = store.acquire(brief, "bench", lease_s=60)
    for _ in range(3):
        claim = store.renew(claim)
    timings["claim+3 heartbeats charged"] = fake.charged(BOT) - charged
    tree = BranchSync(forge, brief, workdir=work / brief, identity=Identity("bench", "b@x"))
    (tree.checkout() / f"{brief}.txt").write_text("work\n")
    head = tree.sync("work")
    if kind == "approval":
        claim = store.set_waiting(claim, "approval")
    else:
        store.release(claim, done=True)
    write_review(
        forge, brief, head_sha=head, title=f"Bench {index}", body="Bench work.", state="ready"
    )
    desk_job = ("claims", "reviews")  # a desk job holds no gate key
    sync(forge, [brief], parts=desk_job, gate_workflow="assay-gate.yml")
    phase("desk", mark, charged)

    # The gate: its verdict as the signed check run (red while an approval is missing).
    mark, charged = time.perf_counter(), fake.charged(BOT)
    row = RowStatus("unit", "true", "pass", "pass", head, Verdict.PASS)
    waits = ["approval: no /assay approve yet"] if kind == "approval" else []
    mirror.publish_evidence(
        brief, decision=MergeDecision(brief, head, [row], waits), key=gate_key()
    )
    phase("gate", mark, charged)

    verified = MergeDecision(brief, head, [row])
    if kind != "plain":
        # A maintainer approves on the pull request; the events job reads it. A brief that
        # needs the approval has its waiting desk dispatched and its gate started again,
        # as `assay github events --dispatch ... --dispatch-gate ...` does.
        pull = mirror.state(brief).pull
        people.post(f"/repos/acme/widgets/issues/{pull}/comments", json={"body": "/assay approve"})
        mark, charged = time.perf_counter(), fake.charged(BOT)
        report = collect_events(forge)
        if kind == "approval":
            assert [e["brief"] for e in report.appended] == [brief]
            forge.api.dispatch("assay-desk.yml", inputs={"desk": "bench", "brief": brief})
            dispatch_answered(forge, [brief], workflow="assay-gate.yml")
            mirror.publish_evidence(brief, decision=verified, key=gate_key())
        phase("events", mark, charged)
    if kind == "approval":
        # The woken desk finishes its run; its job's sync says so on the issue.
        mark, charged = time.perf_counter(), fake.charged(BOT)
        assert brief in issue_briefs(forge).briefs
        claim = store.acquire(brief, "bench", lease_s=60, allow_waiting=True)
        store.release(claim, done=True)
        sync(forge, [brief], parts=desk_job, gate_workflow="assay-gate.yml")
        phase("woken", mark, charged)

    mark, charged = time.perf_counter(), fake.charged(BOT)
    record = store.get(brief)
    assert record is not None
    final = review_body(brief, issue=issue, summary="Bench work.", decision=verified)
    message = f"Bench work\n\nAssay-Brief: {brief}\nAssay-Head: {head}\n"
    mirror.merge(brief, head_sha=head, body=final, claim=record, message=message)
    phase("merge", mark, charged)

    # The sweep's liveness check: one conditional list of the runs in progress.
    mark, charged = time.perf_counter(), fake.charged(BOT)
    forge.api.runs_in_progress()
    phase("liveness", mark, charged)

    api = [c for c in fake.calls[first:] if c.user == BOT and not c.path.startswith("git:")]
    timings["lifecycle REST calls"] = sum(timings[f"{name} charged"] for name in PHASES)
    timings["writes"] = sum(1 for c in api if c.method != "GET")
    timings["poll lists"] = sum(
        1
        for c in api
        if c.method == "GET"
        and c.status != 304
        and c.path.removeprefix("/repos/acme/widgets") in POLL_LISTS
    )
    timings["polls"] = 1 if kind == "plain" else 2
    timings["sent"] = len(api)
    timings["lifecycle s"] = time.perf_counter() - start
    return dict(timings)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--briefs", type=int, default=2, help="lifecycles of each kind")
    parser.add_argument("--polls", type=int, default=10, help="quiet event polls to time")
    parser.add_argument("--kind", choices=KINDS, action="append", help="(default: every kind)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="assay-bench-github-") as tmp:
        root = Path(tmp)
        # The push budget's minute shortened as in the tests: lifecycles back to back.
        os.environ[WINDOW_ENV] = TEST_WINDOW_S
        with FakeGitHub(root / "gh") as fake:
            fake.seed_main(WORKFLOWS)
            os.environ.update(
                GITHUB_API_URL=fake.api_url,
                GITHUB_TOKEN="ghs-bot",
                ASSAY_GITHUB_WRITE_SPACING="0",
                ASSAY_STATE=str(root / "state"),
                ASSAY_GATE_STATE=str(root / "gate-state"),
            )
            people = httpx.Client(
                base_url=fake.api_url,
                headers={"Authorization": "Bearer ghp-maintainer", "User-Agent": "bench"},
            )
            forge = open_forge("github:acme/widgets", cache_dir=root / "cache")
            assert isinstance(forge, GitHubForge)
            with forge, people:
                for kind in args.kind or KINDS:
                    results: dict[str, list[float]] = defaultdict(list)
                    for index in range(args.briefs):
                        ran = _lifecycle(fake, forge, people, index, root / "w", kind)
                        for key, value in ran.items():
                            results[key].append(value)
                    print(
                        f"GitHub adapter against the fake GitHub, {args.briefs} {kind} lifecycles"
                    )
                    for key, values in results.items():
                        print(
                            f"  {key:<28} median {statistics.median(values):8.3f}"
                            f"  max {max(values):8.3f}"
                        )
                charged = fake.charged(BOT)
                started = time.perf_counter()
                for _ in range(args.polls):
                    collect_events(forge)
                poll_s = (time.perf_counter() - started) / max(args.polls, 1)
                quiet_cost = fake.charged(BOT) - charged
            print(f"  {'quiet event poll s':<28} mean   {poll_s:8.3f}")
            print(f"  {'quiet polls REST charged':<28} {quiet_cost} for {args.polls} polls")
            print(f"  {'contract violations':<28} {len(fake.violations)}")


if __name__ == "__main__":
    main()
