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
import dataclasses
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
from assay.github.sync import sync
from tests.github.fake_github import BOT, TEST_WINDOW_S, FakeGitHub

# What one events poll reads for every brief at once: the open issues, the open pull
# requests, the comments since the cursor.
POLL_LISTS = frozenset({"/issues", "/pulls", "/issues/comments"})
PHASES = ("accept", "desk", "gate", "events", "merge", "liveness")


def _lifecycle(
    fake: FakeGitHub, forge: GitHubForge, people: httpx.Client, index: int, work: Path
) -> dict[str, float]:
    """One brief from its issue to its merge, as the shipped workflows run it; the requests
    the bot was charged (``<phase> charged``), of which writes (``writes``) and the events
    polls' shared lists (``poll lists``), the requests sent (``sent``: 304s too, what a
    runner with a cold cache would pay), and wall times."""
    brief = f"bench-{index}"
    timings: dict[str, float] = defaultdict(float)
    start, first = time.perf_counter(), len(fake.calls)
    issue = people.post(
        "/repos/acme/widgets/issues",
        json={
            "title": f"Bench {index}",
            "body": f"---\nid: {brief}\nverify:\n  - id: unit\n    run: 'true'\n---\nBench.\n",
            "labels": ["assay"],
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

    # The desk job: the brief listed, claimed (git), worked, and its review ready; then the
    # job's sync and its gate job's dispatch.
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
    claim = store.set_waiting(claim, "approval")
    write_review(
        forge, brief, head_sha=head, title=f"Bench {index}", body="Bench work.", state="ready"
    )
    sync(forge, [brief], parts=("claims", "reviews"), gate_workflow="assay-gate.yml")
    phase("desk", mark, charged)

    # The gate: its verdict as the signed check run.
    mark, charged = time.perf_counter(), fake.charged(BOT)
    row = RowStatus("unit", "true", "pass", "pass", head, Verdict.PASS)
    verified = MergeDecision(brief, head, [row])
    mirror.publish_evidence(brief, decision=verified, key=gate_key(create=True))
    phase("gate", mark, charged)

    # A maintainer approves on the pull request; the events job reads it.
    pull = mirror.state(brief).pull
    people.post(f"/repos/acme/widgets/issues/{pull}/comments", json={"body": "/assay approve"})
    mark, charged = time.perf_counter(), fake.charged(BOT)
    collect_events(forge)
    phase("events", mark, charged)

    mark, charged = time.perf_counter(), fake.charged(BOT)
    claim = store.acquire(brief, "bench", lease_s=60, allow_waiting=True)
    final = review_body(brief, issue=issue, summary="Bench work.", decision=verified)
    done = dataclasses.replace(claim.record, state="done")
    message = f"Bench work\n\nAssay-Brief: {brief}\nAssay-Head: {head}\n"
    mirror.merge(brief, head_sha=head, body=final, claim=done, message=message)
    store.release(claim, done=True)
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
    timings["sent"] = len(api)
    timings["lifecycle s"] = time.perf_counter() - start
    return dict(timings)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--briefs", type=int, default=2, help="lifecycles to run")
    parser.add_argument("--polls", type=int, default=10, help="quiet event polls to time")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="assay-bench-github-") as tmp:
        root = Path(tmp)
        # The push budget's minute shortened as in the tests: lifecycles back to back.
        os.environ[WINDOW_ENV] = TEST_WINDOW_S
        with FakeGitHub(root / "gh") as fake:
            fake.seed_main(
                {
                    ".github/workflows/assay-gate.yml": "on:\n  workflow_dispatch:\n    inputs:\n"
                    "      brief: {required: true}\n      sha: {required: false}\njobs: {}\n"
                }
            )
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
                results: dict[str, list[float]] = defaultdict(list)
                for index in range(args.briefs):
                    for key, value in _lifecycle(fake, forge, people, index, root / "w").items():
                        results[key].append(value)
                charged = fake.charged(BOT)
                started = time.perf_counter()
                for _ in range(args.polls):
                    collect_events(forge)
                poll_s = (time.perf_counter() - started) / max(args.polls, 1)
                quiet_cost = fake.charged(BOT) - charged
            print(f"GitHub adapter against the fake GitHub, {args.briefs} lifecycles")
            for key, values in results.items():
                print(
                    f"  {key:<28} median {statistics.median(values):8.3f}  max {max(values):8.3f}"
                )
            print(f"  {'quiet event poll s':<28} mean   {poll_s:8.3f}")
            print(f"  {'quiet polls REST charged':<28} {quiet_cost} for {args.polls} polls (304s)")
            print(f"  {'contract violations':<28} {len(fake.violations)}")


if __name__ == "__main__":
    main()
