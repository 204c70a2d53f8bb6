"""Attacks on the gate's own check run, and on the refs a desk job can write, on GitHub.

A desk job's token is the same app as the gate's (``github-actions``): it may make check
runs named ``assay/evidence``, update that app's runs and push any ``refs/assay/*`` ref.
Another app may make check runs too. Only the gate can sign: each ``assay verify`` publishes
(or supersedes) its check run with the gate's signature over the brief, the head, the
verdict, the evidence tip and the run's own id, and ``assay github merge`` accepts nothing
else. Everything runs through the real CLI against the fake GitHub; every command gets a
fresh ``ASSAY_STATE`` (a fresh runner: a cold cache).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from assay.branch import BranchSync
from assay.claims import ClaimStore
from assay.desks.records.review import read_review, write_review
from assay.evidence.keys import GateKey
from assay.evidence.table import table_in
from assay.forge import Identity, RefLog
from assay.github.forge import GitHubForge
from assay.github.gatecheck import CHECK_NAME, GATE_WORKFLOW
from assay.github.mirror import MIRROR_KIND, GitHubMirror
from assay.github.target import resolve_target
from tests.conftest import assay_argv, assay_env
from tests.gatekeys import key_for
from tests.github.fake_github import FakeGitHub

BRIEF = "tidy"
BRIEF_FILE = """---
id: tidy
title: Tidy up
verify:
  - id: unit
    run: test -e ok
---
Leave a file called ok.
"""
GATE = key_for("the gate of acme/widgets")
DESK = Identity("github-actions[bot]", "bot@example.invalid")


@dataclass
class Scene:
    """A brief in review on the fake GitHub: main holds its brief, the desk's branch its
    work, a ready review record and a pull request. ``run`` is the CLI on a fresh runner."""

    fake: FakeGitHub
    root: Path
    forge: GitHubForge  # the desk job's own view (its token), for what a desk can push
    head: str
    pull: int
    runs: int = 0
    tips: dict[str, str] = field(default_factory=dict)
    gate_run: int = 0  # the gate workflow's run on main that the gate's commands run in

    def env(self, *, gate: bool) -> dict[str, str]:
        self.runs += 1
        gate_state = self.root / ("gate-state" if gate else f"no-key-{self.runs}")
        if gate and not self.gate_run:
            self.gate_run = self.fake.add_workflow_run(GATE_WORKFLOW)
        job = {"GITHUB_RUN_ID": str(self.gate_run)} if gate else {}
        return {
            **job,
            "GITHUB_API_URL": self.fake.api_url,
            "GITHUB_TOKEN": "ghs-bot",
            "ASSAY_FORGE": f"github:{self.fake.slug}",
            "ASSAY_STATE": str(self.root / f"runner-{self.runs}"),  # a cold cache each time
            "ASSAY_GATE_STATE": str(gate_state),
            "ASSAY_GATE_PUBLIC_KEY": GATE.public.text,
            "ASSAY_GITHUB_WRITE_SPACING": "0",
        }

    def run(self, *args: str, gate: bool = False) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            assay_argv(*args),
            cwd=self.root,
            env=assay_env(self.env(gate=gate)),
            capture_output=True,
            text=True,
            timeout=120,
        )

    def verify(self) -> dict[str, Any]:
        done = self.run("verify", BRIEF, "--json", gate=True)
        assert done.returncode in (0, 1), done.stdout + done.stderr
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    def merge(self) -> subprocess.CompletedProcess[str]:
        return self.run("github", "merge", BRIEF)

    def gate_runs(self) -> list[dict[str, Any]]:
        return sorted(
            (r for r in self.fake.check_runs.values() if r["head_sha"] == self.head),
            key=lambda r: int(r["id"]),
        )


def _key_file(directory: Path, key: GateKey) -> None:
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    (directory / "gate.key").write_text(key.text + "\n")
    (directory / "gate.key").chmod(0o600)


@contextlib.contextmanager
def in_review(root: Path, main: dict[str, str]) -> Iterator[Scene]:
    """A fake GitHub whose main holds ``main``, and the brief in review on it: the desk's
    branch with its work, its claim settled at that head, a ready review record and a
    pull request; the gate's key in ``root/gate-state``."""
    with FakeGitHub(root / "github") as fake:
        fake.seed_main(main)
        _key_file(root / "gate-state", GATE)
        env = {"GITHUB_API_URL": fake.api_url, "GITHUB_TOKEN": "ghs-bot"}
        target = resolve_target(f"github:{fake.slug}", environ=env)
        with GitHubForge(target, cache_dir=root / "desk-cache") as forge:
            store = ClaimStore(forge)
            claim = store.acquire(BRIEF, "coder", lease_s=3600)
            sync = BranchSync(
                forge, BRIEF, workdir=root / "work", identity=Identity.for_holder("coder", "h")
            )
            (sync.checkout() / "ok").write_text("ok\n")
            head = sync.sync("leave ok")
            store.release(claim, done=True)  # settled at the head: the journal is vouched for
            write_review(forge, BRIEF, head_sha=head, title="Tidy up", body="", state="ready")
            mirror = GitHubMirror(forge)
            mirror.open_review(BRIEF, title="Tidy up", branch=f"assay/{BRIEF}", body="")
            (pull,) = fake.pulls
            yield Scene(fake, root, forge, head, pull)
    assert not fake.violations, "GitHub contract violations:\n" + "\n".join(fake.violations)


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    """One brief in review for the whole module: the tests below are one story, in order
    (look-alikes, the gate's run, a flip, a rollback, forged and deleted refs, the merge)."""
    with in_review(tmp_path_factory.mktemp("gate-check"), {"briefs/tidy.md": BRIEF_FILE}) as made:
        yield made


def post_check(fake: FakeGitHub, token: str, **fields: Any) -> dict[str, Any]:
    with httpx.Client(
        base_url=fake.api_url, headers={"Authorization": f"Bearer {token}"}, timeout=10
    ) as gh:
        made = gh.post(f"/repos/{fake.slug}/check-runs", json={"name": CHECK_NAME, **fields})
        assert made.status_code == 201, made.text
        result: dict[str, Any] = made.json()
        return result


def patch_check(fake: FakeGitHub, token: str, number: int, **fields: Any) -> httpx.Response:
    with httpx.Client(
        base_url=fake.api_url, headers={"Authorization": f"Bearer {token}"}, timeout=10
    ) as gh:
        return gh.patch(f"/repos/{fake.slug}/check-runs/{number}", json=fields)


def refused(scene: Scene, *needles: str) -> str:
    done = scene.merge()
    assert done.returncode == 1, done.stdout + done.stderr
    assert "merge refused" in done.stderr, done.stderr
    for needle in needles:
        assert needle in done.stderr, (needle, done.stderr)
    assert scene.fake.pulls[scene.pull]["merged"] is False
    return done.stderr


def desk_push(scene: Scene, ref: str, sha: str | None) -> None:
    """Move (or delete, ``sha`` None) a ref with a desk job's token: a plain forced push."""
    scene.forge.refresh([ref])
    subprocess.run(
        [
            "git",
            "-C",
            str(scene.forge.objects_dir.parent),
            "-c",
            "http.extraHeader=Authorization: Bearer ghs-bot",
            "push",
            "-q",
            "--force",
            scene.fake.git_url,
            f"{sha or ''}:{ref}",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    assert scene.fake.ref(ref) == sha


@pytest.mark.slow
def test_the_gates_own_run_is_the_one_a_merge_reads(scene: Scene) -> None:
    verified = scene.verify()
    assert verified["passed"] is True and verified["published"] == ["check+"]
    run = scene.gate_runs()[-1]
    assert (run["conclusion"], run["app"]["slug"]) == ("success", "github-actions")
    tip = scene.fake.ref(f"refs/assay/evidence/{BRIEF}")
    assert tip is not None and f":pass:{tip}:-:ed25519:" in run["external_id"]
    scene.tips["first pass"] = tip
    scene.tips["first proof"] = run["external_id"]
    again = scene.run("github", "sync", "--only", "evidence", "--json", gate=True)
    assert json.loads(again.stdout)["actions"] == {BRIEF: []}  # re-read: nothing new
    # A newer run by the desk's own app (github-actions), naming a gate workflow run as the
    # old check accepted: the newest run of the gate's app decides, and it proves nothing.
    post_check(
        scene.fake, "ghs-bot", head_sha=scene.head, conclusion="success", external_id=f"{BRIEF}:1"
    )
    refused(scene, "carries no gate signature")
    # The desk copies the gate's proof onto a newer run of its own: bound to another id.
    post_check(
        scene.fake,
        "ghs-bot",
        head_sha=scene.head,
        conclusion="success",
        external_id=run["external_id"],
    )
    refused(scene, "carries no gate signature")
    # Another app cannot touch the gate's run; the desk's app can, and gains nothing.
    assert patch_check(scene.fake, "ghs-other", run["id"], conclusion="failure").status_code == 403


def test_the_pull_request_shows_the_block_the_gate_wrote_and_a_desk_judges_nothing(
    scene: Scene,
) -> None:
    # The desk's sync (no key) mirrors the review record as the gate left it: the evidence
    # block there is the gate's rendering at its verify, not a verdict the sync computed.
    done = scene.run("github", "sync", "--only", "reviews", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    review = read_review(scene.forge, BRIEF)
    assert review is not None
    block = table_in(review.body)
    assert block is not None and "verified" in block.lower()
    assert table_in(str(scene.fake.issues[scene.pull]["body"])) == block


def test_a_fail_after_a_pass_at_the_same_head_turns_the_check_red(scene: Scene) -> None:
    # Main's rows change (say a maintainer tightens them) and the gate runs again at the
    # same head: the newest run of the name, the one GitHub shows, is red.
    scene.fake.seed_main({"briefs/tidy.md": BRIEF_FILE.replace("test -e ok", "test -e nope")})
    verified = scene.verify()
    assert verified["passed"] is False and verified["published"] == ["check+"]
    newest = scene.gate_runs()[-1]
    assert newest["conclusion"] == "failure" and ":fail:" in newest["external_id"]


@pytest.mark.slow
def test_a_rollback_past_a_failing_record_is_caught_with_a_cold_cache(scene: Scene) -> None:
    ref = f"refs/assay/evidence/{BRIEF}"
    # The rows are back as they were: the first passing record counts again, and the
    # failing one after it is the gate's last word at this head.
    scene.fake.seed_main({"briefs/tidy.md": BRIEF_FILE})
    red = scene.gate_runs()[-1]
    # The desk force-pushes the evidence ref back to the passing record (every record
    # there is signed), turns the gate's red run green by PATCH, and has another app post a
    # green run carrying a copy of the gate's passing proof.
    desk_push(scene, ref, scene.tips["first pass"])
    assert patch_check(scene.fake, "ghs-bot", red["id"], conclusion="success").status_code == 200
    copied = scene.tips["first proof"]
    post_check(
        scene.fake, "ghs-other", head_sha=scene.head, conclusion="success", external_id=copied
    )
    assert patch_check(scene.fake, "ghs-other", red["id"], conclusion="success").status_code == 403
    refused(scene, f"the gate's newest {CHECK_NAME} check run at {scene.head[:12]}", "is fail")

    # Verified again, passing: the check names the new tip; a rollback behind it is seen
    # although every record left on the ref passes.
    verified = scene.verify()
    assert verified["passed"] is True and verified["published"] == ["check+"]
    newest = scene.fake.ref(ref)
    assert newest is not None and newest != scene.tips["first pass"]
    desk_push(scene, ref, scene.tips["first pass"])
    refused(scene, "evidence rollback", scene.tips["first pass"][:12])
    desk_push(scene, ref, newest)


def test_a_renamed_red_run_a_completed_at_trick_and_a_branch_gate_are_seen(scene: Scene) -> None:
    ref = f"refs/assay/evidence/{BRIEF}"
    passing = scene.fake.ref(ref)
    green = scene.gate_runs()[-1]
    assert passing is not None and green["conclusion"] == "success"
    # A failing verify at the same head: the gate's newest run is red.
    scene.fake.seed_main({"briefs/tidy.md": BRIEF_FILE.replace("test -e ok", "test -e nope")})
    assert scene.verify()["passed"] is False
    red, failing = scene.gate_runs()[-1], scene.fake.ref(ref)
    scene.fake.seed_main({"briefs/tidy.md": BRIEF_FILE})
    # The desk rolls the evidence back past the failing record and renames the red run out
    # of the way: the newest run *named* assay/evidence is the green one again.
    desk_push(scene, ref, passing)
    assert patch_check(scene.fake, "ghs-bot", red["id"], name="lint").status_code == 200
    refused(scene, "renamed", "'lint'")
    assert patch_check(scene.fake, "ghs-bot", red["id"], name=CHECK_NAME).status_code == 200

    # GitHub lists one run per name by default (filter=latest, by completed_at), and the
    # desk's app may set completed_at: the green run completes "last" and hides the red one
    # from a default listing. Assay lists them all and orders by id.
    listing = scene.fake.contract.raw["paths"]["/repos/{owner}/{repo}/commits/{ref}/check-runs"]
    (wanted,) = [p for p in listing["get"]["parameters"] if p.get("name") == "filter"]
    assert wanted["schema"]["default"] == "latest"
    later = {"completed_at": "2099-01-01T00:00:00Z"}
    assert patch_check(scene.fake, "ghs-bot", green["id"], **later).status_code == 200
    with httpx.Client(
        base_url=scene.fake.api_url, headers={"Authorization": "Bearer ghs-bot"}, timeout=10
    ) as gh:
        shown = gh.get(f"/repos/{scene.fake.slug}/commits/{scene.head}/check-runs").json()
    assert [r["id"] for r in shown["check_runs"] if r["app"]["slug"] == "github-actions"] == [
        green["id"]
    ]
    refused(scene, f"({red['id']}) is fail")

    # The gate workflow dispatched on a desk's branch signs with the same key: no proof.
    desk_push(scene, ref, failing)
    branch_run = scene.fake.add_workflow_run(GATE_WORKFLOW)
    scene.fake.workflow_runs[branch_run]["head_branch"] = f"assay/{BRIEF}"
    main_run, scene.gate_run = scene.gate_run, branch_run
    assert scene.verify()["published"] == ["check+"]
    refused(scene, f"workflow run {branch_run} ran {GATE_WORKFLOW} on assay/{BRIEF}")
    # Back on main's gate: a fail, then a pass, published from the gate's own run.
    scene.gate_run = main_run
    scene.fake.seed_main({"briefs/tidy.md": BRIEF_FILE.replace("test -e ok", "test -e nope")})
    assert scene.verify()["passed"] is False
    scene.fake.seed_main({"briefs/tidy.md": BRIEF_FILE})
    assert scene.verify()["published"] == ["check+"]


@pytest.mark.slow
def test_forged_and_deleted_records_refuse_the_merge_and_then_it_merges(scene: Scene) -> None:
    mirror = f"refs/assay/github/{BRIEF}"
    record = scene.fake.ref(mirror)
    assert record is not None
    state = GitHubMirror(scene.forge).state(BRIEF)
    forged = {**state.to_json(), "pull": 99, "issue": 7}
    RefLog(scene.forge, mirror, kind=MIRROR_KIND).append(forged, author=DESK)
    refused(scene, "names pull request #99", "names issue #7")
    desk_push(scene, mirror, None)
    refused(scene, "names no pull request")
    desk_push(scene, mirror, record)

    claim = f"refs/assay/claims/{BRIEF}"
    held = scene.fake.ref(claim)
    desk_push(scene, claim, None)
    gone = scene.merge()  # the journal is vouched for by no claim: corrupt, never merged
    assert gone.returncode == 6 and "refs/assay/claims/tidy is missing" in gone.stderr, gone.stderr
    assert scene.fake.pulls[scene.pull]["merged"] is False
    assert held is not None
    desk_push(scene, claim, held)

    merged = scene.merge()
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert scene.fake.pulls[scene.pull]["merged"] is True
