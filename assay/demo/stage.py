"""The demo's story, driven for real: desks, a crash, an approval, a forged claim, a gate.

``Stage.run`` makes an embedded forge served over smart HTTP on 127.0.0.1, seeds it, starts
desk processes, and then watches the forge (one claims fetch a tick) and acts only through
the same commands a team would use:

- when the crash brief's desk is inside a model call (its local write-ahead journal shows
  the call started and not finished), the demo SIGKILLs that desk; once its lease has
  expired, ``assay sweep`` marks the claim stuck and another desk process resumes the run;
- when the approval brief is waiting and no process holds it, ``assay approve`` pushes the
  approval; the forge's push callback runs the waker at once, which resumes the run;
- when a brief's review is ready, the gate (``assay verify`` then ``assay merge``) runs in
  its own process: verified briefs merge; a desk's false "tests pass" is caught;
- at the end ``assay board`` renders the story, and ``assay.demo.audit`` checks the claims,
  journals and the model-call log for double claims and model calls paid twice.
"""

from __future__ import annotations

import json
import os
import queue
import random
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

import assay.refs as refs
from assay.claims import ClaimRecord, ClaimStore
from assay.demo.audit import Audit, audit_run
from assay.demo.cli_story import (
    KEY_ENV,
    KEY_VALUE,
    CliChoice,
    DemoUpstream,
    choose_cli,
    cli_manifest,
    scripted_model,
)
from assay.demo.display import Display
from assay.demo.fleet import DESK_NAME, DeskProcess, Fleet, child_environment
from assay.demo.material import (
    APPROVAL_BRIEF,
    CRASH_BRIEF,
    DATA,
    DESK_MANIFEST,
    FORGED_BRIEF,
    load_material,
    real_model,
    reset_directory,
    seed_forge,
    write_workspace,
)
from assay.desks.records.review import read_review
from assay.errors import Failed
from assay.evidence.keys import GATE_STATE_ENV, create_key, read_key_file
from assay.evidence.trust import record_gate
from assay.forge import Forge, ForgeServer, init_forge, open_forge
from assay.forge.embedded import ref_tips
from assay.forge.open import TOKEN_ENV
from assay.forge.principals import add_token
from assay.journal.reader import segment_files
from assay.plumbing import RefUpdate
from assay.sweep.engine import run_sweep
from assay.sweep.policy import load_policies

TICK_S = 0.1
# Who holds a token on the demo's forge, by role (the desk's name is the manifest's).
DEMO_PRINCIPALS = {
    "desk": DESK_NAME,
    "gate": "demo-gate",
    "sweeper": "demo-sweeper",
    "person": "demo-person",
}
ASSAY = (sys.executable, "-m", "assay")
SWEEP_EVERY_S = 0.3
SWEEPER_SKEW_S = 0.5  # sweepers/stuck-claims.yaml says the same
GATE_WORKERS = 2  # independent gate processes; merges still land one CAS push at a time


@dataclass(frozen=True)
class DemoOptions:
    directory: Path
    desks: int = 3
    briefs: int = 6
    seed: int = 7
    keep: bool = False
    timeout_s: float = 120.0
    cli: str | None = None  # "codex" or "claude-code": a kind: cli desk driving that CLI


@dataclass
class DemoReport:
    """The summary ``assay demo`` prints, and what ``--json`` carries."""

    briefs_total: int = 0
    briefs_merged: int = 0
    briefs_blocked: int = 0
    briefs_waiting: int = 0
    crashes_injected: int = 0
    crashes_recovered: int = 0
    repaid_model_calls: int = 0
    # Requests sent upstream more than once (a provider bills requests): the call in flight
    # at each kill is sent again by the resumed run, so at most one per crash.
    repeated_requests: int = 0
    double_claims: int = 0
    forged_evidence_caught: int = 0
    refused_pushes: int = 0  # pushes the forge's push rule refused (the desk's push to main)
    approvals_waited: int = 0
    model_calls: int = 0
    steps: int = 0
    desk_processes: int = 0
    sandboxed: bool = True  # False: no bubblewrap here, agent code and rows ran unconfined
    cli: str | None = None  # the agent CLI the desks ran, None for the agent desk
    kill_to_resume_s: float | None = None
    resume_after_stuck_s: float | None = None
    approval_to_resume_s: float | None = None
    board_path: str = ""
    board_html_path: str = ""
    forge_path: str = ""
    forge_url: str = ""
    seconds: float = 0.0
    merged: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            not self.problems
            and self.repaid_model_calls == 0
            and self.repeated_requests <= self.crashes_injected
            and self.double_claims == 0
            and self.crashes_recovered == self.crashes_injected
        )

    def to_json(self) -> dict[str, Any]:
        payload = dict(self.__dict__)
        payload["status"] = "ok" if self.ok else "failed"
        payload["code"] = 0 if self.ok else 1
        return payload


@dataclass
class BriefProgress:
    """What the demo has seen of one brief."""

    brief: str
    depends_on: list[str]
    state: str = "queued"  # queued, held, waiting, stuck, review, verifying, merged, blocked
    desk: str = ""
    fence: int = 0
    gated_head: str = ""


class Stage:
    """One run of the demo; see the module docstring."""

    def __init__(self, options: DemoOptions, display: Display) -> None:
        self.options = options
        self.display = display
        self.directory = options.directory.resolve()
        self.rng = random.Random(options.seed)
        self.report = DemoReport()
        self.progress: dict[str, BriefProgress] = {}
        self.gate_queue: queue.Queue[str | None] = queue.Queue()
        self.gate_results: queue.Queue[tuple[str, str, dict[str, Any]]] = queue.Queue()
        self.events_seen: dict[str, str] = {}
        self.events_lock = threading.Lock()
        self.crash_call = 0
        self.killed_at: float | None = None
        self.killed_fence = 0
        self.stuck_at: float | None = None
        self.approved_at: float | None = None
        self.approval_fence = 0  # the waiting claim's fence when the approval was pushed
        self.last_sweep = 0.0
        self.model: dict[str, str] | None = None  # a real endpoint's model section, if any
        self.cli = choose_cli(options.cli) if options.cli else None  # BadInput before any effect
        self.upstream: DemoUpstream | None = None  # the scripted upstream of a --cli demo
        self.tokens: dict[str, str] = {}  # role -> the token its processes carry

    # -- set-up -------------------------------------------------------------------------

    def _set_up(self) -> tuple[Path, ForgeServer, Forge]:
        reset_directory(self.directory)
        material = load_material(self.options.briefs)
        forge_path = init_forge(self.directory / "forge.git")
        # One token per principal, as a team would give them out: the desks (by the desk's
        # name, which the push rule matches against the claims it writes), the gate, the
        # sweeper and the person who approves. The stage itself reads as the sweeper.
        for role, name in DEMO_PRINCIPALS.items():
            self.tokens[role] = add_token(forge_path, name, role)
        gate = self._gate_state()
        create_key(gate)  # as `assay forge init` does, and its public half recorded
        with open_forge(str(forge_path), cache_dir=self.directory / "state" / "seed") as local:
            record_gate(local, read_key_file(gate))
            seed_forge(local, material)
        self.model = real_model()
        from assay.sandbox import sandbox_available

        self.report.sandboxed = sandbox_available()
        write_workspace(self.directory, model=self.model, sandboxed=self.report.sandboxed)
        # Which model call of the crash brief the kill lands in: the second or the third.
        self.crash_call = self.rng.choice([2, 3])
        if self.cli is not None:
            self._cli_desk(self.cli[0])
        for brief in material.briefs:
            self.progress[brief.id] = BriefProgress(brief.id, list(brief.depends_on))
        self.report.briefs_total = len(material.briefs)
        server = ForgeServer(forge_path, on_push=self._pushed).start()
        forge = open_forge(
            server.url, cache_dir=self.directory / "state" / "stage", token=self.tokens["sweeper"]
        )
        self.report.forge_path = str(forge_path)
        self.report.forge_url = server.url
        return forge_path, server, forge

    def _gate_state(self) -> Path:
        """The gate's own state directory: apart from the desks' state (``state/``)."""
        return self.directory / "gate-state"

    def _cli_desk(self, choice: CliChoice) -> None:
        """Make the demo's desk a ``kind: cli`` desk, with the scripted upstream unless a
        real endpoint was given."""
        self.report.cli = choice.profile
        model = self.model
        if model is None:
            script = (DATA / "desks" / "scripts" / DESK_MANIFEST).read_text(encoding="utf-8")
            upstream = DemoUpstream(script, choice, self.directory / "model-calls.jsonl")
            upstream.start()
            self.crash_call = upstream.arm_crash(CRASH_BRIEF, self.crash_call - 1) + 1
            self.upstream = upstream
            model = scripted_model(choice, upstream.url)
        else:
            model = {**model, "adapter": choice.adapter}
        path = self.directory / "desks" / DESK_MANIFEST
        manifest = yaml.safe_load(path.read_text(encoding="utf-8"))
        desk = cli_manifest(manifest, choice, model, sandboxed=self.report.sandboxed)
        path.write_text(yaml.safe_dump(desk, sort_keys=False), encoding="utf-8")

    def _environment(self) -> dict[str, str]:
        env = child_environment(self.directory)
        env[TOKEN_ENV] = self.tokens["desk"]  # every desk process, and the wakers that resume
        if self.cli is not None:  # the CLI's folder first, and the placeholder key
            env["PATH"] = os.pathsep.join([str(self.cli[1]), env["PATH"]])
            env.setdefault(KEY_ENV, KEY_VALUE)
        return env

    # -- helpers that run real commands ---------------------------------------------------

    def _assay(
        self, *args: str, timeout: float = 60, gate: bool = False
    ) -> tuple[int, dict[str, Any]]:
        # A person's token for what the demo does by hand (approve, the board); only the
        # gate's processes are told where its signing key is, and carry the gate's token.
        env = {**self.fleet.env, TOKEN_ENV: self.tokens["person"]}
        if gate:
            env = {**env, GATE_STATE_ENV: str(self._gate_state()), TOKEN_ENV: self.tokens["gate"]}
        done = subprocess.run(
            [*ASSAY, *args],
            cwd=self.directory,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        try:
            payload = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout else {}
        except (json.JSONDecodeError, IndexError):
            payload = {"stdout": done.stdout}
        if not isinstance(payload, dict):
            payload = {"output": payload}
        payload.setdefault("stderr", done.stderr[-2000:])
        return done.returncode, payload

    def _pushed(self) -> None:
        """The forge's push callback: run the waker for every events ref that moved.

        This is what the embedded forge's receive hook does; the demo runs it from the
        server's own callback so the woken desk gets the demo's environment.
        """
        tips = ref_tips(self.report.forge_path, (refs.EVENTS,))
        with self.events_lock:
            moved = []
            for ref, sha in tips.items():
                if self.events_seen.get(ref) != sha:
                    self.events_seen[ref] = sha
                    moved.append(ref.rsplit("/", 1)[-1])
        logs = self.directory / "logs"
        for brief in moved:
            with open(logs / f"waker-{brief}.log", "ab") as log:
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "assay",
                        "sweep",
                        "wake",
                        "--brief",
                        brief,
                        "--forge",
                        self.report.forge_url,
                    ],
                    cwd=self.directory,
                    env=self.fleet.env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )

    # -- the gate, in its own thread ------------------------------------------------------

    def _gate_worker(self) -> None:
        while (brief := self.gate_queue.get()) is not None:
            unconfined = [] if self.report.sandboxed else ["--insecure-unsandboxed-rows"]
            accept = [] if self.report.sandboxed else ["--allow-unsandboxed-evidence"]
            code, verified = self._assay(
                "verify", brief, "--forge", self.report.forge_url, "--json", *unconfined, gate=True
            )
            if code != 0:
                self.gate_results.put((brief, "blocked", verified))
                continue
            code, merged = self._assay(
                "merge", brief, "--forge", self.report.forge_url, "--json", *accept, gate=True
            )
            self.gate_results.put((brief, "merged" if code == 0 else "blocked", merged))

    def _take_gate_results(self) -> None:
        while not self.gate_results.empty():
            brief, outcome, payload = self.gate_results.get()
            progress = self.progress[brief]
            progress.state = outcome
            if outcome == "merged":
                self.report.merged.append(brief)
                self.display.event(f"gate verified {brief} at {progress.gated_head[:10]}: merged")
                continue
            self.report.blocked.append(brief)
            rows = (payload.get("decision") or {}).get("rows") or []
            forged = [
                r["row"] for r in rows if r.get("claimed") == "pass" and r.get("verdict") != "pass"
            ]
            if forged:
                self.report.forged_evidence_caught += 1
                self.display.event(
                    f"gate caught {brief}: the desk claimed {', '.join(forged)} passed; "
                    "re-run on the exact commit, it fails: not merged"
                )
                self._desk_pushes_to_main(brief, progress.gated_head)
            else:  # not part of the story: say why, and end it (its dependents would wait)
                reason = payload.get("message") or payload.get("stderr", "")[-300:]
                self.display.event(f"gate refused {brief}: {reason}")
                self.report.problems.append(f"the gate refused {brief}: {reason}")

    def _desk_pushes_to_main(self, brief: str, head: str) -> None:
        """The refused desk tries what the gate would not do: push its own head to main,
        with its own token. The forge's push rule refuses it before any ref moves."""
        with open_forge(
            self.report.forge_url,
            cache_dir=self.directory / "state" / "refused-push",
            token=self.tokens["desk"],
        ) as desk:
            main = desk.refresh([refs.MAIN, refs.branch_ref(brief)]).get(refs.MAIN)
            result = desk.push([RefUpdate(refs.MAIN, head, expected=main)])
        if result.ok:
            self.report.problems.append(f"the forge let desk {DESK_NAME} push {brief} to main")
            return
        self.report.refused_pushes += 1
        why = result.detail.strip().splitlines()[-1] if result.detail.strip() else "refused"
        self.display.event(f"forge refused desk {DESK_NAME}'s push of {brief} to main: {why}")

    # -- the story ------------------------------------------------------------------------

    def _observe(self, store: ClaimStore, forge: Forge) -> dict[str, ClaimRecord]:
        claims = {record.brief: record for record in store.list()}
        for brief, progress in self.progress.items():
            record = claims.get(brief)
            if record is None or progress.state in ("verifying", "merged", "blocked"):
                continue
            status = store.status(record)
            desk = _desk_name(record.holder)
            if (status, record.fence) != (progress.state, progress.fence):
                if status == "held":
                    verb = "resumed" if record.fence > 1 else "claimed"
                    self.display.event(f"{desk} {verb} {brief} (fence {record.fence})")
                elif status == "waiting":
                    self.display.event(
                        f"{brief} is waiting for {record.waiting_for}: no process held"
                    )
            progress.desk, progress.fence = desk, record.fence
            if status == "done":
                review = read_review(forge, brief)
                if (
                    review is not None
                    and review.state == "ready"
                    and review.head_sha != progress.gated_head
                ):
                    progress.gated_head = review.head_sha
                    progress.state = "verifying"
                    self.display.event(f"{desk} finished {brief}; review ready, gate started")
                    self.gate_queue.put(brief)
                    continue
            progress.state = status
        return claims

    def _crash(self, claims: dict[str, ClaimRecord]) -> None:
        """Kill the crash brief's desk inside its chosen model call (once)."""
        record = claims.get(CRASH_BRIEF)
        if self.killed_at is not None or record is None or record.state != "held":
            return
        desk = self.fleet.holding(record.holder)
        if desk is None or not desk.alive:
            return
        if self.upstream is not None:  # the scripted upstream holds the chosen call
            if self.upstream.crash_held:
                self._kill(desk, record, self.crash_call)
                self.upstream.let_go()
            return
        journal = desk.workroot / DESK_NAME / CRASH_BRIEF / ".assay" / "journal" / CRASH_BRIEF
        started = finished = 0
        for segment in segment_files(journal) if journal.exists() else []:
            for line in segment.read_bytes().splitlines():
                if b'"step":"model"' not in line:
                    continue
                started += b'"status":"started"' in line
                finished += b'"status":"ok"' in line
        if started >= self.crash_call and finished < started:
            self._kill(desk, record, started)

    def _kill(self, desk: DeskProcess, record: ClaimRecord, call: int) -> None:
        desk.kill()
        self.killed_at = time.monotonic()
        self.killed_fence = record.fence
        self.report.crashes_injected += 1
        self.display.event(
            f"SIGKILL {desk.name} inside model call {call} of {CRASH_BRIEF} "
            f"(its lease stays until it expires)"
        )

    def _recover(self, claims: dict[str, ClaimRecord], store: ClaimStore, forge: Forge) -> None:
        """After the kill: sweep once the lease has expired, then time the resume.

        The stuck-claims sweeper (run here as a cron would, in process) marks the claim
        stuck, naming the last journal step; a new desk process takes it over (fence + 1)
        and continues the run from its journal on the forge.
        """
        record = claims.get(CRASH_BRIEF)
        if self.killed_at is None or record is None or self.report.kill_to_resume_s is not None:
            return
        now = time.monotonic()
        if record.fence > self.killed_fence and record.state == "held":
            self.report.kill_to_resume_s = round(now - self.killed_at, 3)
            if self.stuck_at is not None:
                self.report.resume_after_stuck_s = round(now - self.stuck_at, 3)
            return
        if self.stuck_at is not None or store.status(record) != "expired":
            return
        if now - self.last_sweep < SWEEP_EVERY_S:
            return
        self.last_sweep = now
        report = run_sweep(forge, self.sweepers, by="demo-sweeper")
        stuck = [action for action in report.actions if action.action == "mark-stuck"]
        if any(action.brief == CRASH_BRIEF for action in stuck):
            self.stuck_at = time.monotonic()
            note = next(a.note for a in stuck if a.brief == CRASH_BRIEF)
            self.display.event(f"sweeper: {note}")
            desk = self.fleet.start(brief=CRASH_BRIEF)
            self.display.event(f"{desk.name} started to resume {CRASH_BRIEF} from its journal")

    def _approve(self, claims: dict[str, ClaimRecord]) -> None:
        """Approve the waiting brief once no process holds it; time the wake."""
        record = claims.get(APPROVAL_BRIEF)
        if record is None:
            return
        if self.approved_at is None:
            if record.state != "waiting":
                return
            holder = self.fleet.holding(record.holder)
            if holder is not None and holder.alive:
                return  # approve only once the desk that ran it has exited: nothing is held
            self.approved_at = time.monotonic()
            self.approval_fence = record.fence
            code, payload = self._assay(
                "approve", APPROVAL_BRIEF, "--forge", self.report.forge_url, "--json"
            )
            if code != 0:
                raise Failed(f"assay approve {APPROVAL_BRIEF} failed: {payload}")
            self.display.event(f"approved {APPROVAL_BRIEF}; the forge's push wakes its run")
        elif self.report.approval_to_resume_s is None and record.fence > self.approval_fence:
            # A higher fence is the resumed run, held or (when it was quicker than a tick)
            # already done: either way the approval woke it.
            self.report.approval_to_resume_s = round(time.monotonic() - self.approved_at, 3)
            self.report.approvals_waited += 1

    def _staff(self, claims: dict[str, ClaimRecord]) -> None:
        """Start desks while briefs are claimable and fewer than N desks run."""
        merged = {brief for brief, p in self.progress.items() if p.state == "merged"}
        claimable = [
            brief
            for brief, p in self.progress.items()
            if brief not in claims and set(p.depends_on) <= merged
        ]
        wanted = min(len(claimable), self.options.desks) - len(self.fleet.running)
        for _ in range(max(0, wanted)):
            desk = self.fleet.start()
            self.display.event(f"{desk.name} started")

    def _finished(self) -> bool:
        return all(p.state in ("merged", "blocked") for p in self.progress.values())

    def run(self) -> DemoReport:
        began = time.monotonic()
        forge_path, server, forge = self._set_up()
        self.fleet = Fleet(self.directory, server.url, self._environment())
        if self.cli is not None:  # where `assay sweep wake` checks out too ($ASSAY_STATE/work)
            self.fleet.shared_workroot = self.directory / "state" / "wakers" / "work"
        self.display.event(
            f"forge served at {server.url}; {self.report.briefs_total} briefs on main"
        )
        if not self.report.sandboxed:
            self.display.event(
                "bubblewrap is not installed (or cannot create namespaces): the desks and the "
                "gate's rows run UNSANDBOXED, recorded so on the board; install bubblewrap "
                "to run them in the sandbox"
            )
        for number in range(GATE_WORKERS):
            threading.Thread(
                target=self._gate_worker, name=f"demo-gate-{number}", daemon=True
            ).start()
        # The demo's sweeper judges leases with a shorter skew than the desks do, so that
        # it, not a passing desk, is the one to find the dead desk's claim.
        self.sweepers = [
            policy
            for policy in load_policies(self.directory / "sweepers")
            if policy.kind in ("stuck-claims", "honest-status")
        ]
        store = ClaimStore(forge, skew_s=SWEEPER_SKEW_S)
        try:
            while not self._finished() and not self.report.problems:
                if time.monotonic() - began > self.options.timeout_s:
                    self.report.problems.append(
                        f"the demo did not finish in {self.options.timeout_s:.0f} s: "
                        + ", ".join(f"{b} {p.state}" for b, p in self.progress.items())
                    )
                    break
                self._take_gate_results()
                claims = self._observe(store, forge)
                self._crash(claims)
                self._recover(claims, store, forge)
                self._approve(claims)
                self._staff(claims)
                self.display.update(self.progress)
                time.sleep(TICK_S)  # the pace of the watcher; every action waits on real state
            self._take_gate_results()
            self.display.update(self.progress)
            self._finish(forge, forge_path)
        finally:
            for _ in range(GATE_WORKERS):
                self.gate_queue.put(None)
            self.fleet.stop_all()
            if self.upstream is not None:
                self.upstream.stop()
            server.stop()
            forge.close()
        self.report.seconds = round(time.monotonic() - began, 2)
        return self.report

    def _finish(self, forge: Forge, forge_path: Path) -> None:
        board, html = self.directory / "BOARD.md", self.directory / "board.html"
        code, payload = self._assay(
            "board", "--forge", self.report.forge_url, "--out", str(board), "--html", str(html)
        )
        if code != 0:
            self.report.problems.append(f"assay board failed: {payload.get('stderr', '')[-300:]}")
        self.report.board_path, self.report.board_html_path = str(board), str(html)
        audit: Audit = audit_run(
            forge, forge_path, list(self.progress), self.directory / "model-calls.jsonl"
        )
        self.report.repaid_model_calls = audit.repaid_model_calls
        self.report.double_claims = audit.double_claims
        self.report.model_calls = audit.model_calls
        upstream = audit.repeated_requests
        self.report.repeated_requests = (
            audit.journal_repeated_requests if upstream is None else upstream
        )
        if self.report.repeated_requests > self.report.crashes_injected:
            self.report.problems.append(
                f"{self.report.repeated_requests} model request(s) were sent upstream again, "
                f"more than the {self.report.crashes_injected} in flight at a kill"
            )
        self.report.steps = audit.journal_steps
        self.report.problems += audit.problems
        if audit.model_calls != audit.journal_model_steps:
            self.report.problems.append(
                f"the model answered {audit.model_calls} calls but the journals record "
                f"{audit.journal_model_steps} model steps"
            )
        crash = self.progress.get(CRASH_BRIEF)
        if self.report.crashes_injected and crash is not None and crash.state == "merged":
            self.report.crashes_recovered = self.report.crashes_injected
        self.report.briefs_merged = len(self.report.merged)
        self.report.briefs_blocked = len(self.report.blocked)
        self.report.briefs_waiting = sum(p.state == "waiting" for p in self.progress.values())
        self.report.desk_processes = len(self.fleet.processes)
        # The false "tests pass" is the scripted model's; a real model may well tell the truth.
        scripted = self.model is None
        if scripted and FORGED_BRIEF in self.progress and not self.report.forged_evidence_caught:
            self.report.problems.append(f"the forged claim on {FORGED_BRIEF} was not caught")
        if self.report.forged_evidence_caught and not self.report.refused_pushes:
            self.report.problems.append(
                f"the desk's push of {FORGED_BRIEF} to main was not refused"
            )


def _desk_name(holder: str) -> str:
    """``desk-N`` for the demo's own desk processes; a woken desk is named by its pid."""
    if holder.startswith("desk-"):
        return holder.rsplit("-", 1)[0]
    pid = holder.split("-")[-2] if holder.count("-") >= 2 else holder
    return f"woken desk (pid {pid})"
