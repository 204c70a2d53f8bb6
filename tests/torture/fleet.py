"""A fleet of real desk processes on one embedded forge, for the scale benchmark and the
torture suites.

The forge is served over smart HTTP by ``assay forge serve`` in its own process (so it can
be killed and restarted on the same port), every desk is ``python -m assay desk run`` (via
``tests.torture.desk_driver``, which only counts claim attempts) with its own
``ASSAY_STATE`` folder ("its own machine"), and the model is the scripted adapter. The
inspection side reads the forge's refs and journals once at the end and checks the
invariants Assay promises: one holder at a time, no model call paid twice, every journal
chain valid, every brief finished, trees equal to an uncrashed run's.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from assay.claims import ClaimStore
from assay.desks.records.review import read_review
from assay.desks.records.state import read_tree_journal
from assay.errors import AssayError
from assay.forge import init_forge, open_forge
from assay.plumbing import ASSAY_IDENTITY, RefUpdate
from tests.conftest import REPO_ROOT, assay_env
from tests.forge_fixtures import free_port

SECRET_ENV = "TORTURE_TOKEN"
FILES = ("alpha.txt", "beta.txt")


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def script(*, delay_s: float = 0.0, secret: str | None = None) -> list[dict[str, Any]]:
    """The scripted model's answers: write two files, then finish.

    With ``secret``: the model also says the secret (as a model that saw it would) and asks
    for it with a tool (``printenv``), so redaction and the tools' environment are tested.
    """
    answers = [call("write_file", path=name, content=f"{name}: done\n") for name in FILES]
    if secret is not None:
        answers[0]["content"] = f"I will not repeat the token {secret}."
        answers.append(call("run", command=f"printenv {SECRET_ENV}"))
    answers.append(call("finish", summary="written", evidence=[]))
    if delay_s:
        for answer in answers:
            answer["delay_s"] = delay_s
    return answers


def brief_text(brief_id: str) -> str:
    front = {"id": brief_id, "title": f"Brief {brief_id}", "priority": 1}
    return f"---\n{yaml.safe_dump(front, sort_keys=False)}---\nWrite the two files.\n"


@dataclass
class Desk:
    """One desk process: ``proc``, its machine folder, and how it ended."""

    name: str
    proc: subprocess.Popen[bytes]
    stats: Path
    log: Path
    started: float
    code: int | None = None
    maxrss_kb: int = 0  # wait4's ru_maxrss: the desk or its largest waited-for child (git)
    hwm_kb: int = 0  # VmHWM of the desk's own Python process, sampled while it runs
    killed: bool = False

    def sample(self) -> None:
        try:
            status = Path(f"/proc/{self.proc.pid}/status").read_text()
        except OSError:
            return
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                self.hwm_kb = max(self.hwm_kb, int(line.split()[1]))

    @property
    def alive(self) -> bool:
        return self.code is None


@dataclass
class BriefResult:
    brief: str
    claim_state: str | None
    fence: int
    review: str | None
    starts: int
    takeovers: int
    model_ok: int
    model_positions_repeated: int
    fences_monotonic: bool
    tree: dict[str, str]
    problem: str = ""


@dataclass
class Fleet:
    """The forge, its server, the desks; ``root`` holds everything."""

    root: Path
    briefs: list[str]
    lease: float = 30.0
    delay_s: float = 0.0
    secret: str | None = None
    forge_dir: Path | None = None  # where forge.git lives (default: root), e.g. a small tmpfs
    desks_dir: Path = field(init=False)
    forge_path: Path = field(init=False)
    port: int = field(init=False)
    server: subprocess.Popen[bytes] | None = None
    desks: list[Desk] = field(default_factory=list)
    counter: int = 0

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.desks_dir = self.root / "desks"
        self.forge_path = (self.forge_dir or self.root) / "forge.git"
        self.port = free_port()

    # ---------------------------------------------------------------- set up

    def setup(self) -> None:
        init_forge(self.forge_path)
        files = {f"briefs/{b}.md": brief_text(b).encode() for b in self.briefs}
        files["README.md"] = b"torture project\n"
        with open_forge(str(self.forge_path), cache_dir=self.root / "setup-cache") as forge:
            tip = forge.fetch("refs/heads/main").get("refs/heads/main")
            parents = [tip] if tip else []
            commit = forge.commit(files, parents=parents, message="briefs", author=ASSAY_IDENTITY)
            assert forge.push([RefUpdate("refs/heads/main", commit, expected=tip)]).ok
        (self.desks_dir / "scripts").mkdir(parents=True, exist_ok=True)
        answers = script(delay_s=self.delay_s, secret=self.secret)
        (self.desks_dir / "scripts" / "coder.json").write_text(
            json.dumps({"responses": answers}), encoding="utf-8"
        )
        manifest: dict[str, Any] = {
            "name": "coder",
            "kind": "agent",
            "takes": {"globs": ["*"]},
            "model": {"adapter": "scripted", "script": "scripts/coder.json"},
            "tools": ["read_file", "write_file", "list_files", "finish"],
            "lease": self.lease,
        }
        if self.secret is not None:
            manifest["tools"].append("run")
            manifest["run"] = {"allow": ["printenv"], "env": [SECRET_ENV]}
            manifest["secrets"] = [SECRET_ENV]
        (self.desks_dir / "coder.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")

    # ---------------------------------------------------------------- server

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{self.forge_path.name}"

    def serve(self, *, max_file_bytes: int | None = None) -> None:
        """Start ``assay forge serve`` on this fleet's port; returns once it answers.

        ``max_file_bytes`` caps every file the server and its git children write
        (``RLIMIT_FSIZE``): a forge that cannot store what is pushed to it, for machines
        where a small filesystem cannot be mounted.
        """

        def limit() -> None:
            if max_file_bytes is not None:
                resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))

        self.server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "assay",
                "forge",
                "serve",
                str(self.forge_path),
                "--port",
                str(self.port),
            ],
            env=assay_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=limit if max_file_bytes is not None else None,
        )
        assert self.server.stdout is not None
        line = self.server.stdout.readline().decode().strip()
        if not line.startswith("http://"):
            raise RuntimeError(f"forge server did not start: {line!r}")

    def kill_server(self, *, alone: bool = False) -> None:
        """SIGKILL the server and the git children it started (``alone``: only the server;
        a ``receive-pack`` it started lives on, finishing its push with nobody to tell)."""
        if self.server is not None:
            with contextlib.suppress(ProcessLookupError):
                if alone:
                    os.kill(self.server.pid, signal.SIGKILL)
                else:
                    os.killpg(self.server.pid, signal.SIGKILL)
            self.server.wait(timeout=30)
            if self.server.stdout is not None:
                self.server.stdout.close()
            self.server = None

    # ---------------------------------------------------------------- desks

    def env(self, machine: str, more: dict[str, str] | None = None) -> dict[str, str]:
        extra = {
            "ASSAY_STATE": str(self.root / f"machine-{machine}"),
            "ASSAY_CLAIM_SKEW": "0",
            "ASSAY_FORGE_RETRIES": "4",
            "ASSAY_FORGE_RETRY_SECONDS": "0.2",
        }
        if self.secret is not None:
            extra[SECRET_ENV] = self.secret
        return assay_env({**extra, **(more or {})})

    def start_desk(
        self,
        *args: str,
        machine: str | None = None,
        url: str | None = None,
        desk: str = "coder",
        env: dict[str, str] | None = None,
    ) -> Desk:
        """Start a desk process (a new machine unless ``machine`` names one); ``env`` adds
        to (or overrides) its environment."""
        self.counter += 1
        name = machine or f"m{self.counter}"
        stats = self.root / "stats" / f"{self.counter}.json"
        log = self.root / "logs" / f"{self.counter}.log"
        stats.parent.mkdir(exist_ok=True)
        log.parent.mkdir(exist_ok=True)
        argv = [sys.executable, "-m", "tests.torture.desk_driver", str(stats), "--"]
        argv += ["desk", "run", desk, "--forge", url or self.url]
        argv += ["--desks", str(self.desks_dir), "--json", *args]
        with log.open("wb") as out:
            proc = subprocess.Popen(
                argv,
                cwd=REPO_ROOT,
                env=self.env(name, env),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        started = Desk(name, proc, stats, log, time.monotonic())
        self.desks.append(started)
        return started

    def reap(self) -> list[Desk]:
        """Collect every desk that ended (exit code and peak RSS); the ones still running."""
        for desk in self.desks:
            if desk.code is not None:
                continue
            desk.sample()
            pid, status, usage = os.wait4(desk.proc.pid, os.WNOHANG)
            if pid:
                desk.code = os.waitstatus_to_exitcode(status)
                desk.proc.returncode = desk.code
                desk.maxrss_kb = usage.ru_maxrss
        return [d for d in self.desks if d.alive]

    def kill(self, desk: Desk) -> None:
        """SIGKILL the desk and its children (a git push, a tool command)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(desk.proc.pid, signal.SIGKILL)
        desk.killed = True
        _, status, usage = os.wait4(desk.proc.pid, 0)
        desk.code = os.waitstatus_to_exitcode(status)
        desk.proc.returncode = desk.code
        desk.maxrss_kb = usage.ru_maxrss

    def wait_all(self, *, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.reap():
            if time.monotonic() > deadline:
                raise TimeoutError(f"desks still running after {timeout} s")
            time.sleep(0.05)  # polling the process table, not synchronising with anything

    def stop(self) -> None:
        for desk in self.desks:
            if desk.alive:
                self.kill(desk)
        self.kill_server()

    def runs(self, desk: Desk) -> list[dict[str, Any]]:
        """The ``runs`` of a desk's ``--json`` output (empty when it was killed)."""
        text = desk.log.read_text(encoding="utf-8", errors="replace")
        for line in reversed(text.splitlines()):
            if line.startswith("{"):
                try:
                    found = json.loads(line)
                except ValueError:
                    continue
                if isinstance(found, dict) and "runs" in found:
                    return list(found["runs"])
        return []

    def stats(self) -> dict[str, int]:
        total = {"acquire_calls": 0, "acquire_busy": 0, "acquired": 0}
        for desk in self.desks:
            if desk.stats.exists():
                for key, value in json.loads(desk.stats.read_text()).items():
                    total[key] += value
        return total

    # ---------------------------------------------------------------- inspection

    def all_done(self) -> bool:
        """Every brief's claim is ``done`` (one fetch of the claim refs, no journals read)."""
        with open_forge(str(self.forge_path), cache_dir=self.root / "watch-cache") as forge:
            states = {r.brief: r.state for r in ClaimStore(forge).list()}
        return all(states.get(brief) == "done" for brief in self.briefs)

    def leases_run_out(self) -> bool:
        """No unfinished brief is held on a lease still running, judged as the desks judge it
        (no skew): a desk started now can take every brief that is left."""
        with open_forge(str(self.forge_path), cache_dir=self.root / "watch-cache") as forge:
            store = ClaimStore(forge, skew_s=0)
            return all(store.status(r) != "held" for r in store.list() if r.brief in self.briefs)

    def inspect(self) -> dict[str, BriefResult]:
        """Read every brief's claim, review, journal and tree from the forge (one fetch)."""
        results: dict[str, BriefResult] = {}
        with open_forge(str(self.forge_path), cache_dir=self.root / "inspect-cache") as forge:
            tips = forge.fetch(["refs/heads/assay/", "refs/assay/journal/"])
            claims = {r.brief: r for r in ClaimStore(forge).list()}
            for brief in self.briefs:
                claim = claims.get(brief)
                # The checkpoint (work tree and journal): the journal ref, by the branch.
                tip = tips.get(f"refs/assay/journal/{brief}") or tips.get(
                    f"refs/heads/assay/{brief}"
                )
                review = read_review(forge, brief)
                result = BriefResult(
                    brief=brief,
                    claim_state=claim.state if claim else None,
                    fence=claim.fence if claim else 0,
                    review=review.state if review else None,
                    starts=0,
                    takeovers=0,
                    model_ok=0,
                    model_positions_repeated=0,
                    fences_monotonic=True,
                    tree={},
                )
                if tip is not None:
                    try:
                        journal = read_tree_journal(forge, tip, brief)
                    except AssayError as error:  # a broken chain is a finding, not a crash
                        result.problem = f"journal: {error}"
                        journal = None
                    if journal is not None:
                        entries = journal.entries
                        result.starts = sum(e["kind"] == "start" for e in entries)
                        result.takeovers = sum(e["kind"] == "takeover" for e in entries)
                        model = [
                            e
                            for e in entries
                            if e["kind"] == "step"
                            and e.get("step") == "model"
                            and e.get("status") == "ok"
                        ]
                        result.model_ok = len(model)
                        positions = [e.get("pos") for e in model]
                        result.model_positions_repeated = len(positions) - len(set(positions))
                        fences = [e["fence"] for e in entries]
                        result.fences_monotonic = fences == sorted(fences)
                    result.tree = self._tree(tip)
                results[brief] = result
        return results

    def _tree(self, tip: str) -> dict[str, str]:
        done = subprocess.run(
            ["git", f"--git-dir={self.forge_path}", "ls-tree", "-r", tip],
            capture_output=True,
            text=True,
            check=True,
        )
        files = {}
        for line in done.stdout.splitlines():
            meta, path = line.split("\t", 1)
            if not path.startswith(".assay/"):
                files[path] = meta.split()[2]
        return files

    def model_answers(self) -> int:
        return len(script(secret=self.secret))


def invariant_problems(fleet: Fleet, results: dict[str, BriefResult]) -> list[str]:
    """Every broken promise, one line each (empty when all hold)."""
    problems = []
    answers = fleet.model_answers()
    trees = {  # the briefs/ folder is main's, which may gain briefs between runs
        json.dumps({p: s for p, s in r.tree.items() if not p.startswith("briefs/")}, sort_keys=True)
        for r in results.values()
    }
    for r in results.values():
        where = f"{r.brief}:"
        if r.problem:
            problems.append(f"{where} {r.problem}")
        if (r.claim_state, r.review) != ("done", "ready"):
            problems.append(f"{where} claim {r.claim_state}, review {r.review}: not finished")
        if r.starts != 1:
            problems.append(f"{where} {r.starts} start entries (double claim?)")
        if not r.fences_monotonic:
            problems.append(f"{where} journal fences go backwards (two holders interleaved)")
        if r.takeovers > r.fence:  # the first holder writes one too (fence 1)
            problems.append(f"{where} {r.takeovers} takeovers with fence {r.fence}")
        if r.model_ok != answers or r.model_positions_repeated:
            problems.append(
                f"{where} {r.model_ok} recorded model calls for {answers} answers "
                f"({r.model_positions_repeated} positions repeated): a repaid call"
            )
        if not set(FILES) <= set(r.tree):
            problems.append(f"{where} tree lacks {sorted(set(FILES) - set(r.tree))}")
    if len(trees) > 1:
        problems.append(f"{len(trees)} different final trees across briefs (expected one)")
    return problems
