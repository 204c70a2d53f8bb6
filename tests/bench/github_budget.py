"""GitHub budget: ``python -m tests.bench.github_budget [--briefs N]`` (prints figures).

Drives whole brief lifecycles through the GitHub adapter (``assay.github``) against the fake
GitHub of ``tests/github`` (real HTTP and smart-HTTP git on 127.0.0.1), reusing the lifecycle
of the GitHub area's benchmark (``tests.bench.github``), and counts what the fake charges
against the bot token's primary rate limit: issue read, claim (git only),
claim mirror (label + comment), draft pull request, ready for review, gate dispatch, check
run, ``/assay approve`` comment collected, merge. Also the cost of a quiet poll (issues and
comments with nothing new: conditional requests, a 304 is free). From these: the briefs per
hour a 1,000-requests-per-hour ``GITHUB_TOKEN`` allows, with and without a poll every
5 minutes (the fastest GitHub schedules).
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
POLLS_PER_HOUR = 12  # scheduled workflows run at most every 5 minutes

GATE_WORKFLOW = (
    "on:\n  workflow_dispatch:\n    inputs:\n      brief: {required: true}\n"
    "      sha: {required: false}\njobs: {}\n"
)


def measure(*, briefs: int = 3) -> dict[str, Any]:
    """Whole lifecycles through ``tests.bench.github._lifecycle`` (the GitHub area's own
    benchmark), then one quiet poll: the issue list and the comment scan with nothing new."""
    try:
        import httpx

        from assay.forge import open_forge
        from assay.forge.budget import WINDOW_ENV
        from assay.github.events import collect_events
        from assay.github.issues import issue_briefs
        from tests.bench.github import _lifecycle
        from tests.github.fake_github import BOT, TEST_WINDOW_S, FakeGitHub
    except ImportError as missing:
        return {"error": f"the GitHub adapter is not available on this branch: {missing}"}
    saved = dict(os.environ)
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
                )
                for name in ("ASSAY_GITHUB_GIT_URL", "ASSAY_GITHUB_TOKEN_ENV"):
                    os.environ.pop(name, None)
                fake.seed_main({".github/workflows/assay-gate.yml": GATE_WORKFLOW})
                people = httpx.Client(
                    base_url=fake.api_url,
                    headers={"Authorization": "Bearer ghp-maintainer", "User-Agent": "bench"},
                )
                forge = open_forge("github:acme/widgets", cache_dir=root / "cache")
                with forge, people:
                    calls_before = len(fake.calls)
                    costs = [
                        int(_lifecycle(fake, forge, people, i, root / "w")["lifecycle REST calls"])
                        for i in range(briefs)
                    ]
                    writes = [
                        c
                        for c in fake.calls[calls_before:]
                        if c.method != "GET" and not c.path.startswith("git:") and c.user == BOT
                    ]
                    issue_briefs(forge)  # warm the ETag cache, as a running poller has
                    collect_events(forge)
                    before = fake.charged(BOT)
                    issue_briefs(forge)
                    collect_events(forge)
                    poll = int(fake.charged(BOT) - before)
                violations = list(fake.violations)
            finally:
                os.environ.clear()
                os.environ.update(saved)
    per_brief = statistics.median(costs) + 1  # + reading the issue once (the issue list)
    return {
        "lifecycles": briefs,
        "calls_per_brief": per_brief,
        "lifecycle_calls_all": costs,
        "writes_per_brief": len(writes) / briefs,
        "quiet_poll_calls": poll,
        "briefs_per_hour": REQUESTS_PER_HOUR / per_brief,
        "briefs_per_hour_with_polling": (REQUESTS_PER_HOUR - POLLS_PER_HOUR * poll) / per_brief,
        "contract_violations": violations,
    }


def rows(f: dict[str, Any]) -> list[tuple[str, str, str]]:
    if "error" in f:
        return [("GitHub budget", "n/a", f["error"])]
    return [
        (
            "GitHub: REST calls per brief lifecycle",
            f"{f['calls_per_brief']:g}",
            "issue to merge, + 1 issue read; claims + heartbeats cost 0 (git)",
        ),
        (
            "GitHub: writes per brief lifecycle",
            f"{f['writes_per_brief']:g}",
            "POST/PATCH/PUT/GraphQL: content-creating cap 500/h",
        ),
        ("GitHub: quiet poll (issues + comments)", str(f["quiet_poll_calls"]), "conditional GETs"),
        (
            "GitHub: briefs/hour on a 1,000 req/h token",
            f"{f['briefs_per_hour']:.0f}",
            f"{f['briefs_per_hour_with_polling']:.0f} with a poll every 5 min",
        ),
    ]


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
        print(f"{name:<52} {value:>12}  {note}")


if __name__ == "__main__":
    main()
