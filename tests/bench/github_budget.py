"""GitHub budget: ``python -m tests.bench.github_budget [--briefs N]`` (prints figures).

Drives whole brief lifecycles through the GitHub adapter (``assay.github``) against the fake
GitHub of ``tests/github`` (real HTTP and smart-HTTP git on 127.0.0.1), reusing the lifecycle
of the GitHub area's benchmark (``tests.bench.github``): the maintainer's labelled issue
accepted by the events job, the desk's claim (git only), its sync (claim label, claim
comment and the ready pull request in one GraphQL request; the gate dispatched), the gate's
signed check run, a ``/assay approve`` comment read by the events job, the merge (one
GraphQL request), the sweep's liveness check. It counts what the fake charges the bot's
token the way GitHub does (a conditional GET answered 304 is free; a GraphQL request is one
request) and the writes (content-creating requests: POST, PATCH, PUT, DELETE and GraphQL
mutations), side by side with issue 26's targets: at most 8 requests and 5 writes a brief.

Two accountings of the events polls: *sequential*, every poll serving the one brief in
flight (each lifecycle pays the poll's three shared lists: open issues, open pull requests,
comments since the cursor), and *per brief*, those lists counted once per poll, which reads
them for every brief with news (what a brief adds to a busy repository's polls). From these:
the briefs per hour GitHub's limits carry on one repository (1,000 requests an hour for a
``GITHUB_TOKEN``, 500 content-creating requests an hour).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

REQUESTS_PER_HOUR = 1000
WRITES_PER_HOUR = 500  # GitHub's secondary limit on content-creating requests
POLLS_PER_HOUR = 12  # scheduled workflows run at most every 5 minutes
TARGET_CALLS = 8  # issue 26: charged requests per brief lifecycle, the liveness check included
TARGET_WRITES = 5  # issue 26: content-creating requests per brief lifecycle


def measure(*, briefs: int = 3) -> dict[str, Any]:
    """``briefs`` whole lifecycles of each kind through ``tests.bench.github._lifecycle``
    (the GitHub area's own benchmark), then one quiet poll: the issue list and the comment
    scan with nothing new."""
    try:
        import httpx

        from assay.forge import open_forge
        from assay.forge.budget import WINDOW_ENV
        from assay.github.events import collect_events
        from assay.github.issues import issue_briefs
        from tests.bench.github import KINDS, PHASES, WORKFLOWS, _lifecycle
        from tests.github.fake_github import BOT, TEST_WINDOW_S, FakeGitHub
    except ImportError as missing:
        return {"error": f"the GitHub adapter is not available on this branch: {missing}"}
    saved = dict(os.environ)
    runs: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="assay-bench-github-") as tmp:
        root = Path(tmp)
        # The push budget's minute shortened as in the tests: lifecycles back to back.
        os.environ[WINDOW_ENV] = TEST_WINDOW_S
        with FakeGitHub(root / "github", rate_limit=100_000) as fake:
            try:
                os.environ.update(
                    GITHUB_API_URL=fake.api_url,
                    GITHUB_TOKEN="ghs-bot",
                    ASSAY_GITHUB_WRITE_SPACING="0",
                    ASSAY_STATE=str(root / "state"),
                    ASSAY_GATE_STATE=str(root / "gate-state"),
                )
                for name in ("ASSAY_GITHUB_GIT_URL", "ASSAY_GITHUB_TOKEN_ENV"):
                    os.environ.pop(name, None)
                fake.seed_main(WORKFLOWS)
                people = httpx.Client(
                    base_url=fake.api_url,
                    headers={"Authorization": "Bearer ghp-maintainer", "User-Agent": "bench"},
                )
                forge = open_forge("github:acme/widgets", cache_dir=root / "cache")
                with forge, people:
                    # What a repository or a client pays once (the label `assay:claimed`
                    # made, the repository's node id, the maintainer's permission) is paid
                    # by a first lifecycle, not measured: the figures are the steady state.
                    _lifecycle(fake, forge, people, 0, root / "w", "plain")  # type: ignore[arg-type]
                    for kind in KINDS:
                        runs[kind] = [
                            _lifecycle(fake, forge, people, i + 1, root / "w", kind)  # type: ignore[arg-type]
                            for i in range(briefs)
                        ]
                    issue_briefs(forge)  # type: ignore[arg-type]  # warm the ETag cache
                    collect_events(forge)  # type: ignore[arg-type]
                    before = fake.charged(BOT)
                    issue_briefs(forge)  # type: ignore[arg-type]
                    collect_events(forge)  # type: ignore[arg-type]
                    poll = int(fake.charged(BOT) - before)
                violations = list(fake.violations)
            finally:
                os.environ.clear()
                os.environ.update(saved)
    figures: dict[str, Any] = {"lifecycles": briefs, "quiet_poll_calls": poll}
    for kind, measured in runs.items():
        calls = statistics.median(run["lifecycle REST calls"] for run in measured)
        # Each events poll's three lists are read once for every brief with news: counted
        # once a poll, a brief adds what is its own.
        own = statistics.median(run["lifecycle REST calls"] - run["poll lists"] for run in measured)
        writes = statistics.median(run["writes"] for run in measured)
        figures[kind] = {
            "calls_per_brief": calls,
            "calls_per_brief_polls_shared": own,
            "writes_per_brief": writes,
            "requests_sent_per_brief": statistics.median(run["sent"] for run in measured),
            "phases": {
                p: statistics.median(run[f"{p} charged"] for run in measured) for p in PHASES
            },
            "briefs_per_hour": min(REQUESTS_PER_HOUR / calls, WRITES_PER_HOUR / writes),
            "briefs_per_hour_polls_shared": min(REQUESTS_PER_HOUR / own, WRITES_PER_HOUR / writes),
        }
    figures.update(
        target_calls=TARGET_CALLS, target_writes=TARGET_WRITES, contract_violations=violations
    )
    return figures


NAMES = {
    "plain": "a brief its gate's pass merges",
    "commented": "+ an /assay approve comment read",
    "approval": "a brief that needs approval",
}


def rows(f: dict[str, Any]) -> list[tuple[str, str, str]]:
    if "error" in f:
        return [("GitHub budget", "n/a", f["error"])]
    found: list[tuple[str, str, str]] = []
    for kind, name in NAMES.items():
        k = f[kind]
        phases = ", ".join(f"{p} {n:g}" for p, n in k["phases"].items() if n)
        found += [
            (
                f"GitHub, {name}: requests",
                f"{k['calls_per_brief_polls_shared']:g}",
                f"target {f['target_calls']}, polls shared; {k['calls_per_brief']:g} sequential"
                f" ({phases}); {k['requests_sent_per_brief']:g} sent with 304s",
            ),
            (
                f"GitHub, {name}: writes",
                f"{k['writes_per_brief']:g}",
                f"target {f['target_writes']}; content-creating requests, 500/h",
            ),
            (
                f"GitHub, {name}: briefs/hour",
                f"{k['briefs_per_hour_polls_shared']:.0f}",
                f"{k['briefs_per_hour']:.0f} with every poll serving one brief",
            ),
        ]
    found.append(
        ("GitHub: quiet poll (issues + comments)", str(f["quiet_poll_calls"]), "conditional GETs")
    )
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--briefs", type=int, default=3, help="lifecycles to run (default 3)")
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON")
    options = parser.parse_args(argv)
    figures = measure(briefs=options.briefs)
    if options.json:
        print(json.dumps(figures, indent=2))
        return
    for name, value, note in rows(figures):
        print(f"{name:<52} {value:>6}  {note}")


if __name__ == "__main__":
    main()
