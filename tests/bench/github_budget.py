"""GitHub budget: ``python -m tests.bench.github_budget [--briefs N]`` (prints figures).

Drives whole brief lifecycles through the GitHub adapter (``assay.github``) against the fake
GitHub of ``tests/github`` (real HTTP and smart-HTTP git on 127.0.0.1), and counts what the
fake charges against the bot token's primary rate limit: issue read, claim (git only),
claim mirror (label + comment), draft pull request, ready for review, gate dispatch, check
run, ``/assay approve`` comment collected, merge. Also the cost of a quiet poll (issues and
comments with nothing new: conditional requests, a 304 is free). From these: the briefs per
hour a 1,000-requests-per-hour ``GITHUB_TOKEN`` allows, with and without a poll every
5 minutes (the fastest GitHub schedules).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

REQUESTS_PER_HOUR = 1000
POLLS_PER_HOUR = 12  # scheduled workflows run at most every 5 minutes

ISSUE_BODY = """---
id: {brief}
verify:
  - id: unit
    run: python -m pytest -q
---
Add `median()` to stats.py.
"""


def _lifecycle(fake: Any, forge: Any, brief: str, work: Path) -> int:
    """One brief from issue to merge; the requests the bot was charged."""
    import httpx

    from assay.branch import BranchSync
    from assay.claims import ClaimStore
    from assay.forge import Identity
    from assay.github.events import collect_events
    from assay.github.issues import load_issue_briefs
    from assay.github.mirror import GitHubMirror, review_body
    from tests.github.fake_github import BOT

    headers = {"Authorization": "Bearer ghp-maintainer", "User-Agent": "a-person"}
    with httpx.Client(base_url=fake.api_url, headers=headers, timeout=10) as person:
        made = person.post(
            "/repos/acme/widgets/issues",
            json={"title": brief, "body": ISSUE_BODY.format(brief=brief), "labels": ["assay"]},
        )
        issue = int(made.json()["number"])
    before = fake.charged(BOT)
    loaded = load_issue_briefs(forge.api)
    title = loaded.briefs[brief].brief.title
    store = ClaimStore(forge)
    claim = store.acquire(brief, "example", lease_s=60)
    mirror = GitHubMirror(forge)
    mirror.claim(brief, claim.record, issue=issue)
    claim = store.renew(claim)
    mirror.claim(brief, claim.record)  # a heartbeat: nothing people see changes
    sync = BranchSync(forge, brief, workdir=work / brief, identity=Identity.for_holder("d", "h"))
    tree = sync.checkout()
    (tree / "stats.py").write_text("def median(xs):\n    return sorted(xs)[len(xs) // 2]\n")
    head = sync.sync("add median")
    rows = [{"row": "unit", "claimed": "pass"}]
    body = review_body(brief, issue=issue, summary="Added median().", rows=rows)
    mirror.open_review(brief, title=title, branch=f"assay/{brief}", body=body)
    claim = store.set_waiting(claim, "approval")
    mirror.finish_review(brief, body=body, claim=claim.record)
    forge.api.dispatch("assay-gate.yml", inputs={"brief": brief, "sha": head})
    verified = [{"row": "unit", "claimed": "pass", "verified": "pass", "exit": 0, "seconds": 0.1}]
    mirror.publish_evidence(brief, head_sha=head, rows=verified)
    pull = mirror.state(brief).pull
    with httpx.Client(base_url=fake.api_url, headers=headers, timeout=10) as person:
        person.post(f"/repos/acme/widgets/issues/{pull}/comments", json={"body": "/assay approve"})
    collect_events(forge)
    claim = store.acquire(brief, "example", lease_s=60, allow_waiting=True)
    final = dataclasses.replace(claim.record, state="done")
    mirror.merge(brief, head_sha=head, body=body, claim=final)
    store.release(claim, done=True)
    return int(fake.charged(BOT) - before)


def measure(*, briefs: int = 3) -> dict[str, Any]:
    try:
        from assay.forge import open_forge
        from assay.github.init import starter_files
        from tests.github.fake_github import BOT, FakeGitHub
    except ImportError as missing:
        return {"error": f"the GitHub adapter is not available on this branch: {missing}"}
    saved = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="assay-bench-github-") as tmp:
        root = Path(tmp)
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
                fake.seed_main(
                    {p: s.read_text() for p, s in starter_files().items()}
                    | {"stats.py": "def mean(xs):\n    return sum(xs) / len(xs)\n"}
                )
                with open_forge("github:acme/widgets", cache_dir=root / "cache") as forge:
                    costs = [
                        _lifecycle(fake, forge, f"brief-{i}", root / "work") for i in range(briefs)
                    ]
                    from assay.github.events import collect_events
                    from assay.github.issues import load_issue_briefs

                    before = fake.charged(BOT)
                    load_issue_briefs(forge.api)
                    collect_events(forge)
                    poll = int(fake.charged(BOT) - before)
                violations = list(fake.violations)
            finally:
                os.environ.clear()
                os.environ.update(saved)
    per_brief = statistics.median(costs)
    return {
        "lifecycles": briefs,
        "calls_per_brief": per_brief,
        "calls_per_brief_all": costs,
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
            "issue to merge; claims + heartbeats cost 0 (git)",
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
