"""A fleet of twenty desks on one host against the fake GitHub's push budget (6 a window).

Four ``assay desk run`` processes (the real CLI) of five slots each share the host's push
ledger and its group (``assay.forge.group``): twenty runs at once, each an issue brief of a
scripted conversation, in ``window`` durability (GitHub's default). Time is compressed
through the one setting the fake and the client both read (``ASSAY_FORGE_BUDGET_WINDOW_
SECONDS``): a minute is ``WINDOW_S``, and the desk's lease and checkpoint window are scaled
with it (a 5-minute lease, a 30-second window). The fake counts every push and refuses any
over the budget; on top of that it refuses a few pushes outright, as GitHub may for pushes
Assay cannot see.

Every brief finishes, the fake's own push log never holds more than 6 pushes in a window,
the fake never had to refuse a push over the budget (the desks kept to it between them),
and each refused push was backed off and sent again with nothing lost.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from assay.claims import ClaimStore
from assay.desks.records.review import read_review
from assay.forge import open_forge
from assay.forge.budget import WINDOW_ENV, PushBudget
from tests.conftest import assay_argv, assay_env
from tests.github.fake_github import FakeGitHub, Limits
from tests.github.test_desk_on_github import TOKEN, call, open_issue

PROCESSES, SLOTS = 4, 5  # twenty desks on one host
WINDOW_S = 2.0  # GitHub's minute, compressed
EVENTS_WINDOW_S = 0.25  # ... and shorter still for the events job that accepts the briefs
CALLS = 6  # each brief's conversation: a call every 1/8 of a minute or so
FORCED = 2  # pushes the fake refuses whatever its count
BODY = """---
verify:
  - id: unit
    run: python -c "print('ok')"
---
Write the files.
"""


def write_fleet_desk(desks: Path) -> None:
    (desks / "scripts").mkdir(parents=True)
    steps = [
        dict(call("write_file", path=f"f{n}.txt", content=f"{n}\n"), delay_s=WINDOW_S / 8)
        for n in range(CALLS)
    ]
    done = call("finish", summary="written", evidence=[{"row": "unit", "result": "pass"}])
    script = {"responses": [*steps, done]}
    (desks / "scripts" / "coder.json").write_text(json.dumps(script), encoding="utf-8")
    manifest = {
        "name": "coder",
        "kind": "agent",
        "takes": {"globs": ["*"]},
        "model": {"adapter": "scripted", "script": "scripts/coder.json"},
        "tools": ["write_file", "finish"],
        "lease": 5 * WINDOW_S,  # GitHub's default 5 minutes, in this test's minutes
        "checkpoint_window": f"{WINDOW_S / 2}s",  # 30 seconds
        "concurrency": SLOTS,
    }
    (desks / "coder.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")


def test_a_fleet_of_twenty_keeps_to_the_push_budget_and_loses_nothing(tmp_path: Path) -> None:
    desks_count = PROCESSES * SLOTS
    limits = Limits(push_window_s=EVENTS_WINDOW_S)
    with FakeGitHub(tmp_path / "github", limits=limits) as fake:
        fake.seed_main({"README.md": "widgets\n"})
        numbers = [open_issue(fake, f"Files {n}", BODY, ["assay"]) for n in range(desks_count)]
        desks = tmp_path / "desks"
        write_fleet_desk(desks)
        env = assay_env(
            {
                "GITHUB_API_URL": fake.api_url,
                "GITHUB_TOKEN": TOKEN,
                "ASSAY_STATE": str(tmp_path / "state"),  # one host: one ledger, one group
                "ASSAY_GATE_STATE": str(tmp_path / "gate-state"),
                "ASSAY_GITHUB_WRITE_SPACING": "0",
            }
        )
        forge = ["--forge", f"github:{fake.slug}", "--desks", str(desks)]
        # The events job first: the maintainer's labels fix the issues' texts as briefs.
        accepted = subprocess.run(
            assay_argv("github", "events", "--json", *forge[:2]),
            cwd=tmp_path,
            env={**env, WINDOW_ENV: str(EVENTS_WINDOW_S)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert len(json.loads(accepted.stdout)["accepted"]) == desks_count, accepted.stderr
        limits.push_window_s = WINDOW_S  # the fleet's minute from here on
        before = len(fake.pushes)
        fake.throttle_next_pushes(FORCED)
        fleet = [
            subprocess.Popen(
                assay_argv("desk", "run", "coder", "--json", *forge),
                cwd=tmp_path,
                env={**env, WINDOW_ENV: str(WINDOW_S)},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(PROCESSES)
        ]
        ends = [desk.communicate(timeout=400) for desk in fleet]
        for desk, (out, err) in zip(fleet, ends, strict=True):
            assert desk.returncode in (0, 3), out + err  # 3: a slot found nothing left
        runs = [run for out, _ in ends for run in json.loads(out)["runs"]]
        briefs = sorted(f"issue-{n}" for n in numbers)
        assert sorted(r["brief"] for r in runs) == briefs  # each brief run once, by one desk
        assert {(r["status"], r["review"]) for r in runs} == {("ok", "ready")}

        # The fake's own log: never over the budget in any window, and no push refused
        # over it: only the forced refusals, each sent again.
        pushed = fake.pushes[before:]
        assert PushBudget(window=WINDOW_S).count_in_window(pushed) <= 6
        assert len(fake.throttled_pushes) == FORCED and fake.forced_throttles == 0
        assert sum(err.count("refused a push over its rate") for _, err in ends) == FORCED
        # Claim, checkpoints, finish, end and settlement of twenty briefs: far fewer pushes
        # than the five or more each brief alone would make.
        assert len(pushed) < 3 * desks_count, len(pushed)

        # Nothing lost: every brief's claim is done, its review ready, its work on its branch.
        with open_forge(str(fake.bare), cache_dir=tmp_path / "reader") as reader:
            for brief in briefs:
                claim = ClaimStore(reader).get(brief)
                review = read_review(reader, brief)
                assert claim is not None and claim.state == "done", brief
                assert review is not None and review.state == "ready", brief
                branch = f"refs/heads/assay/{brief}"
                assert fake._git("show", f"{branch}:f{CALLS - 1}.txt") == str(CALLS - 1), brief
    assert not fake.violations, "\n".join(fake.violations)


pytestmark = pytest.mark.slow
