"""A fleet of desks on one host against the fake GitHub's push budget (6 pushes a window).

Three ``assay desk run --once`` processes (the real CLI) share the host's push ledger, each
running one issue brief of three scripted calls in ``window`` durability (GitHub's
default). The fake counts every push and refuses any over the budget; on top of that it
refuses a few pushes outright, as GitHub may for pushes Assay cannot see. Every brief
finishes, the fake's own push log never holds more than 6 pushes in a window, the fake
never had to refuse a push over the budget (the desks kept to it between them), and each
refused push was backed off and sent again with nothing lost.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from assay.claims import ClaimStore
from assay.desks.records.review import read_review
from assay.forge import open_forge
from assay.forge.budget import WINDOW_ENV
from tests.conftest import assay_argv, assay_env
from tests.github.fake_github import FakeGitHub, Limits
from tests.github.test_desk_on_github import ISSUE_BODY, TOKEN, open_issue, write_desk

DESKS = 3
WINDOW_S = 1.0  # long enough that three desks' pushes (5 or so each) span several windows
FORCED = 2  # pushes the fake refuses whatever its count


def test_a_fleet_keeps_to_the_push_budget_and_loses_nothing(tmp_path: Path) -> None:
    with FakeGitHub(tmp_path / "github", limits=Limits(push_window_s=WINDOW_S)) as fake:
        fake.seed_main({"README.md": "widgets\n"})
        numbers = [open_issue(fake, f"Say hello {n}", ISSUE_BODY, ["assay"]) for n in range(DESKS)]
        desks = tmp_path / "desks"
        write_desk(desks)
        env = assay_env(
            {
                "GITHUB_API_URL": fake.api_url,
                "GITHUB_TOKEN": TOKEN,
                "ASSAY_BOT_CRED": TOKEN,
                "ASSAY_GITHUB_TOKEN_ENV": "ASSAY_BOT_CRED",
                "GH_COPY": TOKEN,
                "ASSAY_VISIBLE": "visible-value",
                "ASSAY_STATE": str(tmp_path / "state"),  # one host: one ledger
                "ASSAY_GATE_STATE": str(tmp_path / "gate-state"),
                "ASSAY_GITHUB_WRITE_SPACING": "0",
                WINDOW_ENV: str(WINDOW_S),
            }
        )
        forge = ["--forge", f"github:{fake.slug}", "--desks", str(desks)]
        # The events job first: the maintainer's labels fix the issues' texts as briefs.
        accepted = subprocess.run(
            assay_argv("github", "events", "--json", *forge[:2]),
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert len(json.loads(accepted.stdout)["accepted"]) == DESKS, accepted.stderr
        fake.throttle_next_pushes(FORCED)
        fleet = [
            subprocess.Popen(
                assay_argv("desk", "run", "coder", "--once", "--json", *forge),
                cwd=tmp_path,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(DESKS)
        ]
        ends = [desk.communicate(timeout=240) for desk in fleet]
        for desk, (out, err) in zip(fleet, ends, strict=True):
            assert desk.returncode == 0, out + err
        runs = [run for out, _ in ends for run in json.loads(out)["runs"]]
        briefs = sorted(f"issue-{n}" for n in numbers)
        assert sorted(r["brief"] for r in runs) == briefs  # each brief run once, by one desk
        assert {(r["status"], r["review"]) for r in runs} == {("ok", "ready")}

        # The fake's own log: never over the budget in any window, and no push refused
        # over it: only the forced refusals, each sent again.
        assert fake.most_pushes_in_window() <= 6
        assert len(fake.throttled_pushes) == FORCED and fake.forced_throttles == 0
        assert sum(err.count("refused a push over its rate") for _, err in ends) == FORCED
        assert len(fake.pushes) >= 3 * DESKS  # claim, branch, settle at least, per brief

        # Nothing lost: every brief's claim is done, its review ready, its work on its branch.
        with open_forge(str(fake.bare), cache_dir=tmp_path / "reader") as reader:
            for brief in briefs:
                claim = ClaimStore(reader).get(brief)
                review = read_review(reader, brief)
                assert claim is not None and claim.state == "done", brief
                assert review is not None and review.state == "ready", brief
                branch = f"refs/heads/assay/{brief}"
                assert fake._git("show", f"{branch}:hello.txt") == "hello", brief
    assert not fake.violations, "\n".join(fake.violations)


pytestmark = pytest.mark.slow
