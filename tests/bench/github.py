"""Benchmark: what Assay costs on GitHub, measured against the fake GitHub on loopback.

Prints, for a number of whole brief lifecycles (issue -> claim -> mirror -> draft pull
request -> ready -> gate dispatch -> check run -> approval comment -> merge):
REST/GraphQL calls charged per lifecycle (the budget is 12), calls made by claims and
heartbeats (0), the wall time of each phase, and the cost of quiet polls (ETag 304s).

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
from assay.evidence.rule import MergeDecision, RowStatus, Verdict
from assay.forge import Identity, open_forge
from assay.forge.budget import WINDOW_ENV
from assay.github.events import collect_events
from assay.github.forge import GitHubForge
from assay.github.mirror import GitHubMirror, review_body
from tests.github.fake_github import BOT, TEST_WINDOW_S, FakeGitHub


def _lifecycle(
    fake: FakeGitHub, forge: GitHubForge, people: httpx.Client, index: int, work: Path
) -> dict[str, float]:
    brief = f"bench-{index}"
    timings: dict[str, float] = {}
    start = time.perf_counter()
    issue = people.post(
        "/repos/acme/widgets/issues",
        json={
            "title": f"Bench {index}",
            "body": f"---\nid: {brief}\nverify:\n  - id: unit\n    run: true\n---\nBench.\n",
            "labels": ["assay"],
        },
    ).json()["number"]
    charged = fake.charged(BOT)
    store, mirror = ClaimStore(forge), GitHubMirror(forge)

    mark = time.perf_counter()
    claim = store.acquire(brief, "bench", lease_s=60)
    for _ in range(3):
        claim = store.renew(claim)
    timings["claim+3 heartbeats s"] = time.perf_counter() - mark
    timings["claim REST calls"] = fake.charged(BOT) - charged

    mark = time.perf_counter()
    mirror.claim(brief, claim.record, issue=issue)
    sync = BranchSync(forge, brief, workdir=work / brief, identity=Identity("bench", "b@x"))
    (sync.checkout() / f"{brief}.txt").write_text("work\n")
    head = sync.sync("work")
    row = RowStatus("unit", "true", "pass", None, None, Verdict.MISSING)
    body = review_body(
        brief, issue=issue, summary="Bench work.", decision=MergeDecision(brief, head, [row])
    )
    mirror.open_review(brief, title=f"Bench {index}", branch=f"assay/{brief}", body=body)
    claim = store.set_waiting(claim, "approval")
    mirror.finish_review(brief, body=body, claim=claim.record)
    forge.api.dispatch("assay-gate.yml", inputs={"brief": brief, "sha": head})
    passing = dataclasses.replace(row, verified="pass", at=head, verdict=Verdict.PASS)
    verified = MergeDecision(brief, head, [passing])
    mirror.publish_evidence(brief, decision=verified)
    timings["mirror+review+evidence s"] = time.perf_counter() - mark

    pull = mirror.state(brief).pull
    people.post(f"/repos/acme/widgets/issues/{pull}/comments", json={"body": "/assay approve"})
    mark = time.perf_counter()
    collect_events(forge)
    timings["events s"] = time.perf_counter() - mark

    mark = time.perf_counter()
    claim = store.acquire(brief, "bench", lease_s=60, allow_waiting=True)
    final = review_body(brief, issue=issue, summary="Bench work.", decision=verified)
    message = f"Bench work\n\nAssay-Brief: {brief}\nAssay-Head: {head}\n"
    mirror.merge(brief, head_sha=head, body=final, claim=claim.record, message=message)
    store.release(claim, done=True)
    timings["merge s"] = time.perf_counter() - mark
    timings["lifecycle REST calls"] = fake.charged(BOT) - charged
    timings["lifecycle s"] = time.perf_counter() - start
    return timings


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
                GITHUB_API_URL=fake.api_url, GITHUB_TOKEN="ghs-bot", ASSAY_GITHUB_WRITE_SPACING="0"
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
