"""A desk run against the fake GitHub: an ``assay`` issue is a brief, and the token stays out.

``assay desk run --once`` (the real CLI, in a subprocess) reads the open issues labelled
``assay`` beside ``briefs/`` on main, claims the issue's brief over git and runs it with the
scripted model. The token is the forge's secret: it reaches no file of the branch, no
journal line or blob, no review body, and neither the agent's ``run`` tool nor the
objective's judge sees it in its environment, whatever the variable holding it is called.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from assay.claims import ClaimStore
from assay.desks.records.review import read_review
from assay.errors import BadInput
from assay.forge import open_forge
from assay.github.forge import PUSHES_PER_MINUTE
from assay.journal import load_packed, read_journal
from tests.conftest import AssayRunner, assay_argv, assay_env
from tests.github.fake_github import BOT, Call, FakeGitHub

TOKEN = "ghs-bot"  # the fake's token for the bot user (write permission)
ISSUE_BODY = f"""---
verify:
  - id: unit
    run: python -c "print('ok')"
objective:
  judge: env
  max_runs: 1
---
Write hello.txt. (Someone pasted a token here by mistake: {TOKEN})
"""


def open_issue(fake: FakeGitHub, title: str, body: str, labels: list[str]) -> int:
    with httpx.Client(
        base_url=fake.api_url,
        headers={"Authorization": "Bearer ghp-maintainer", "User-Agent": "a-person"},
        timeout=10,
    ) as gh:
        made = gh.post(
            f"/repos/{fake.slug}/issues", json={"title": title, "body": body, "labels": labels}
        )
        assert made.status_code == 201, made.text
        return int(made.json()["number"])


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def write_desk(desks: Path) -> None:
    (desks / "scripts").mkdir(parents=True)
    script = {
        "responses": [
            call("run", command="env"),
            call("write_file", path="hello.txt", content="hello\n"),
            call("finish", summary="wrote hello.txt", evidence=[{"row": "unit", "result": "pass"}]),
        ]
    }
    (desks / "scripts" / "coder.json").write_text(json.dumps(script), encoding="utf-8")
    manifest = {
        "name": "coder",
        "kind": "agent",
        "takes": {"globs": ["*"]},
        "model": {"adapter": "scripted", "script": "scripts/coder.json"},
        "tools": ["write_file", "run", "finish"],
        # Asking for the token's variables does not get them; ASSAY_VISIBLE shows that
        # declared variables do reach the command.
        "run": {"allow": ["env"], "env": ["ASSAY_BOT_CRED", "ASSAY_VISIBLE", "GH_COPY"]},
        "lease": 60,
    }
    (desks / "coder.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")


@dataclass
class DeskPass:
    """One ``assay desk run coder --once --json`` over the fake, and what it left."""

    fake: FakeGitHub
    calls: list[Call]  # the fake's calls when the pass had finished
    number: int
    bad: int
    brief: str
    done: subprocess.CompletedProcess[str]
    env: dict[str, str]
    forge: list[str]
    tip: str
    tree: Path
    pushes: list[float]  # the fake's push log of the desk pass (after the events job)

    @property
    def journal_dir(self) -> Path:
        return self.tree / ".assay" / "journal" / self.brief

    def outputs(self) -> dict[str, Any]:
        journal = read_journal(self.journal_dir)
        return {
            e["name"]: load_packed(self.journal_dir, e["out"])
            for e in journal.entries
            if e["kind"] == "step" and e.get("status") == "ok"
        }


@pytest.fixture(scope="module")
def desk_pass(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeskPass]:
    """One desk pass, made once for the module: every test reads what it left, and the
    commands a test runs beside it (a refused ``--brief``, a dry-run sweep, verify) push
    nothing another test reads. Any contract violation fails the module's last test."""
    tmp_path = tmp_path_factory.mktemp("desk-on-github")
    with FakeGitHub(tmp_path / "github") as fake_github:
        yield make_desk_pass(fake_github, tmp_path)
    assert not fake_github.violations, "GitHub contract violations:\n" + "\n".join(
        fake_github.violations
    )


def make_desk_pass(fake_github: FakeGitHub, tmp_path: Path) -> DeskPass:
    fake_github.seed_main({"README.md": "widgets\n"})
    number = open_issue(fake_github, "Say hello", ISSUE_BODY, ["assay"])
    bad = open_issue(fake_github, "Broken", "---\nverify: 3\n---\nx\n", ["assay"])
    desks = tmp_path / "desks"
    write_desk(desks)
    env = {
        "GITHUB_API_URL": fake_github.api_url,
        # The token under a name that does not look like a secret, and a copy of it.
        "ASSAY_GITHUB_TOKEN_ENV": "ASSAY_BOT_CRED",
        "ASSAY_BOT_CRED": TOKEN,
        "GH_COPY": TOKEN,
        "GITHUB_TOKEN": TOKEN,
        "ASSAY_VISIBLE": "visible-value",
        "ASSAY_STATE": str(tmp_path / "state"),
        "ASSAY_GATE_STATE": str(tmp_path / "gate-state"),
        "ASSAY_GITHUB_WRITE_SPACING": "0",
    }
    forge = ["--forge", f"github:{fake_github.slug}", "--desks", str(desks)]
    # The events job: the maintainer's labels fix both issues' texts as briefs.
    accepted = subprocess.run(
        assay_argv("github", "events", "--json", *forge[:2]),
        cwd=tmp_path,
        env=assay_env({**env, "ASSAY_STATE": str(tmp_path / "events-state")}),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert set(json.loads(accepted.stdout)["accepted"]) == {str(number), str(bad)}, accepted.stderr
    fake_github.calls.clear()  # what the desk pass below calls
    before = len(fake_github.pushes)  # the events job's own pushes are not the pass's
    done = subprocess.run(
        assay_argv("desk", "run", "coder", "--once", "--json", *forge),
        cwd=tmp_path,
        env=assay_env(env),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    brief = f"issue-{number}"
    tip = fake_github.ref(f"refs/heads/assay/{brief}")
    assert tip is not None
    # The checkpoint (work tree and journal) is on the journal ref; the branch is the code.
    checkpoint = fake_github.ref(f"refs/assay/journal/{brief}")
    assert checkpoint is not None
    tree = tmp_path / "branch"
    tree.mkdir()
    archive = subprocess.run(
        ["git", "archive", checkpoint], cwd=fake_github.bare, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    calls = list(fake_github.calls)
    return DeskPass(
        fake_github,
        calls,
        number,
        bad,
        brief,
        done,
        env,
        forge,
        tip,
        tree,
        list(fake_github.pushes)[before:],
    )


def test_an_assay_issue_is_claimed_and_run_by_desk_run_once(
    desk_pass: DeskPass, run_assay: AssayRunner, tmp_path: Path
) -> None:
    fake_github = desk_pass.fake
    result = json.loads(desk_pass.done.stdout)
    assert [(r["brief"], r["status"], r["review"]) for r in result["runs"]] == [
        (desk_pass.brief, "ok", "ready")
    ]
    # The brief came from the issue: its branch holds the work, the journal and the verdict
    # of the issue's objective; the claim is done and the review record ready.
    assert (desk_pass.tree / "hello.txt").read_text() == "hello\n"
    assert desk_pass.outputs()["objective.judge"]["exit"] == 0
    with open_forge(str(fake_github.bare), cache_dir=tmp_path / "reader") as reader:
        review = read_review(reader, desk_pass.brief)
        claim = ClaimStore(reader).get(desk_pass.brief)
    assert review is not None and review.state == "ready"
    assert "Say hello" in review.title and "assay:evidence:begin" in review.body
    assert claim is not None and (claim.state, claim.desk) == ("done", "coder")
    # The malformed issue is reported, naming it; naming it with --brief is exit 65.
    named = run_assay(
        "desk",
        "run",
        "coder",
        "--brief",
        f"issue-{desk_pass.bad}",
        *desk_pass.forge,
        env=desk_pass.env,
    )
    assert named.returncode == BadInput.code, named.stdout + named.stderr
    assert f"issue #{desk_pass.bad}" in named.stderr and "verify" in named.stderr


def test_a_desk_pass_fits_in_one_minute_of_the_push_budget(desk_pass: DeskPass) -> None:
    """In ``window`` durability (GitHub's default) the whole pass, claim to settled review,
    pushes no more than GitHub's 6 a minute: on GitHub it never waits for the budget."""
    assert 3 <= len(desk_pass.pushes) <= PUSHES_PER_MINUTE


def test_desk_run_reports_its_rest_calls(desk_pass: DeskPass) -> None:
    """The one conditional list of open ``assay`` issues; claims and journals are git."""
    rest = json.loads(desk_pass.done.stdout)["rest"]
    api = [c for c in desk_pass.calls if c.user == BOT and not c.path.startswith("git:")]
    assert rest["calls"] == len(api) >= 1 and rest["charged"] >= 1 and rest["writes"] == 0


def test_the_token_reaches_no_object_no_review_no_tool_and_no_judge(
    desk_pass: DeskPass, tmp_path: Path
) -> None:
    fake_github = desk_pass.fake
    outputs = desk_pass.outputs()
    # The run tool's command saw the declared variable, and no variable holding the token,
    # although the manifest asked for two of them by name.
    shown = outputs["run"]["output"]
    assert "ASSAY_VISIBLE=visible-value" in shown
    assert "ASSAY_BOT_CRED" not in shown and "GH_COPY" not in shown
    assert "GITHUB_TOKEN" not in shown and TOKEN not in shown
    # Nor did the objective's judge (`env`, run in a fresh clone of the branch).
    judged = outputs["objective.judge"]
    assert judged["exit"] == 0 and "PATH=" in judged["tail"]
    assert "ASSAY_BOT_CRED" not in judged["tail"] and "GH_COPY" not in judged["tail"]
    assert "GITHUB_TOKEN" not in judged["tail"] and TOKEN not in judged["tail"]

    # The issue pasted the token into the brief the model was sent: it is redacted in every
    # object of the repository (branch files, journal lines and blobs, the review record,
    # claims), in the review body and in the command's output.
    every_object = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"],
        cwd=fake_github.bare,
        capture_output=True,
        check=True,
    ).stdout
    assert b"Someone pasted a token here" in every_object
    assert TOKEN.encode() not in every_object
    for path in desk_pass.tree.rglob("*"):
        assert not path.is_file() or TOKEN.encode() not in path.read_bytes(), path
    with open_forge(str(fake_github.bare), cache_dir=tmp_path / "reader") as reader:
        review = read_review(reader, desk_pass.brief)
    assert review is not None and TOKEN not in review.body
    assert TOKEN not in desk_pass.done.stdout + desk_pass.done.stderr


def test_an_issue_brief_is_no_orphan_and_the_gate_verifies_it(
    desk_pass: DeskPass, run_assay: AssayRunner
) -> None:
    """Sweeps and the gate know issue briefs: --fix would otherwise delete their work."""
    swept = run_assay("sweep", "--dry-run", "--json", *desk_pass.forge[:2], env=desk_pass.env)
    assert swept.returncode == 0, swept.stdout + swept.stderr
    orphans = [a for a in json.loads(swept.stdout)["actions"] if a["kind"] == "orphans"]
    assert all(desk_pass.brief not in json.dumps(action) for action in orphans), orphans
    # The desk job's token rewrites the issue's rows after the pass: the gate verifies the
    # rows the maintainer's label accepted, not these.
    with httpx.Client(
        base_url=desk_pass.fake.api_url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
    ) as gh:
        cheat = "---\nverify:\n  - id: cheat\n    run: 'true'\n---\nx\n"
        edited = gh.patch(
            f"/repos/{desk_pass.fake.slug}/issues/{desk_pass.number}", json={"body": cheat}
        )
        assert edited.status_code == 200, edited.text
    verified = run_assay(
        "verify", desk_pass.brief, "--json", *desk_pass.forge[:2], env=desk_pass.env
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    report = json.loads(verified.stdout)
    assert report["passed"] is True
    assert [row["row"] for row in report["decision"]["rows"]] == ["unit"]
