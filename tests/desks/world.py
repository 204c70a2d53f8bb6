"""A forge, desks and briefs for the desk loop's end-to-end tests, driven by the real CLI.

Every desk process is ``python -m assay`` in a subprocess with its own ``ASSAY_STATE``
(its own forge cache and work directory), so "another machine" is another state folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from assay.claims import ClaimRecord, ClaimStore
from assay.desks import load_desks
from assay.desks.host.loop import DeskLoop, RunReport
from assay.desks.records.events import EventLog
from assay.desks.records.review import Review, read_review
from assay.desks.records.state import read_tree_journal
from assay.forge import open_forge
from assay.journal import Journal, load_packed, read_journal
from assay.runtime import Event
from tests.conftest import assay_argv, assay_env
from tests.fakes.openai_server import FakeOpenAIServer
from tests.forge_fixtures import put_on_main, wait_until


def brief_text(brief_id: str, *, title: str = "", body: str = "Do it.", **front: Any) -> str:
    data = {"id": brief_id, "title": title or f"Brief {brief_id}", **front}
    return f"---\n{yaml.safe_dump(data, sort_keys=False)}---\n{body}\n"


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def finish(summary: str = "done", **rows: str) -> dict[str, Any]:
    evidence = [{"row": row, "result": result} for row, result in rows.items()]
    return {"tool_calls": [call("finish", summary=summary, evidence=evidence)]}


def write(path: str, content: str) -> dict[str, Any]:
    return {"tool_calls": [call("write_file", path=path, content=content)]}


@dataclass
class World:
    root: Path
    forge_path: Path
    desks: Path = field(init=False)
    procs: list[subprocess.Popen[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.desks = self.root / "desks"
        (self.desks / "scripts").mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return str(self.forge_path)

    # -------------------------------------------------------------- set up

    def add_briefs(self, *texts: str) -> None:
        files = {}
        for text in texts:
            brief_id = yaml.safe_load(text.split("---")[1])["id"]
            files[f"briefs/{brief_id}.md"] = text
        put_on_main(self.forge_path, files)

    def add_raw_brief(self, name: str, text: str) -> None:
        put_on_main(self.forge_path, {f"briefs/{name}.md": text})

    def add_desk(
        self,
        name: str,
        responses: list[dict[str, Any]] | None = None,
        *,
        tools: tuple[str, ...] = ("read_file", "write_file", "list_files", "finish"),
        lease: float = 30,
        takes: dict[str, Any] | None = None,
        model: dict[str, Any] | None = None,
        **extra: Any,
    ) -> None:
        if model is None:
            script = self.desks / "scripts" / f"{name}.json"
            script.write_text(json.dumps({"responses": responses or []}), encoding="utf-8")
            model = {"adapter": "scripted", "script": f"scripts/{name}.json"}
        manifest = {
            "name": name,
            "kind": "agent",
            "takes": takes or {"globs": ["*"]},
            "model": model,
            "tools": list(tools),
            "lease": lease,
            **extra,
        }
        (self.desks / f"{name}.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")

    # -------------------------------------------------------------- running

    def env(self, machine: str, extra: dict[str, str] | None = None) -> dict[str, str]:
        return assay_env(
            {
                "ASSAY_STATE": str(self.root / f"machine-{machine}"),
                "ASSAY_CLAIM_SKEW": "0",
                **(extra or {}),
            }
        )

    def assay(
        self, *args: str, machine: str = "a", extra: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            assay_argv(*args),
            cwd=self.root,
            env=self.env(machine, extra),
            capture_output=True,
            text=True,
            timeout=120,
        )

    def desk_args(self, name: str, *args: str) -> tuple[str, ...]:
        """``desk run NAME`` on this world's forge and desks, then ``args``."""
        return ("desk", "run", name, "--forge", self.url, "--desks", str(self.desks), *args)

    def desk(self, name: str, *args: str, machine: str = "a") -> subprocess.CompletedProcess[str]:
        return self.assay(*self.desk_args(name, *args), machine=machine)

    def run_here(
        self, name: str, *, once: bool = True, only: str | None = None, machine: str = "a"
    ) -> list[RunReport]:
        """Run a desk in this process (the same loop the CLI runs, without its start-up)."""
        state = self.root / f"machine-{machine}"
        with open_forge(self.url, cache_dir=state / "cache") as forge:
            loop = DeskLoop(
                forge=forge,
                desk=load_desks(self.desks)[name],
                desks_dir=self.desks,
                workroot=state / "work" / name,
                skew_s=0,
            )
            return loop.run(once=once, only=only)

    def start_desk(self, name: str, *args: str, machine: str = "a") -> subprocess.Popen[str]:
        return self.start(*self.desk_args(name, *args), machine=machine)

    def start(
        self, *args: str, machine: str = "a", extra: dict[str, str] | None = None
    ) -> subprocess.Popen[str]:
        """``assay ARGS`` started in its own session (``kill`` ends it and its children)."""
        proc = subprocess.Popen(
            assay_argv(*args),
            cwd=self.root,
            env=self.env(machine, extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.procs.append(proc)
        return proc

    def kill(self, proc: subprocess.Popen[str]) -> None:
        """SIGKILL the desk and every child it had (git push, a tool's command)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        proc.stderr.close()

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                self.kill(proc)
            else:
                for stream in (proc.stdout, proc.stderr):
                    if stream is not None:
                        stream.close()

    # -------------------------------------------------------------- reading

    def wal(self, machine: str, desk: str, brief: str) -> list[dict[str, Any]]:
        """The local journal lines of a desk's work tree (what the process wrote so far)."""
        folder = (
            self.root / f"machine-{machine}" / "work" / desk / brief / ".assay" / "journal" / brief
        )
        lines: list[dict[str, Any]] = []
        for segment in sorted(folder.glob("*.jsonl")) if folder.exists() else []:
            for line in segment.read_text(encoding="utf-8").splitlines():
                try:
                    lines.append(json.loads(line))
                except ValueError:
                    break  # a torn last line: still being written
        return lines

    def claim(self, brief: str) -> ClaimRecord | None:
        with open_forge(self.url, cache_dir=self._cache()) as forge:
            return ClaimStore(forge).get(brief)

    def claim_expired(self, brief: str) -> bool:
        with open_forge(self.url, cache_dir=self._cache()) as forge:
            store = ClaimStore(forge, skew_s=0)
            record = store.get(brief)
            return record is not None and store.status(record) in {"expired", "stuck", "released"}

    def event(self, brief: str, kind: str, text: str = "", actor: str = "tester") -> Event:
        with open_forge(self.url, cache_dir=self._cache()) as forge:
            return EventLog(forge, brief).append(kind, text=text, actor=actor)

    def review(self, brief: str) -> Review | None:
        with open_forge(self.url, cache_dir=self._cache()) as forge:
            return read_review(forge, brief)

    def branch_tip(self, brief: str) -> str | None:
        ref = f"refs/heads/assay/{brief}"
        with open_forge(self.url, cache_dir=self._cache()) as forge:
            return forge.fetch(ref).get(ref)

    def journal(self, brief: str) -> Journal:
        ref = f"refs/assay/journal/{brief}"  # the checkpoints: work tree and journal
        with open_forge(self.url, cache_dir=self._cache()) as forge:
            tip = forge.fetch(ref)[ref]
            journal = read_tree_journal(forge, tip, brief)
        assert journal is not None
        return journal

    def outputs(self, brief: str, name: str) -> list[Any]:
        """The recorded outputs of the finished steps named ``name``, in order."""
        with tempfile.TemporaryDirectory() as tmp:
            archive = subprocess.run(
                [
                    "git",
                    f"--git-dir={self.forge_path}",
                    "archive",
                    f"refs/assay/journal/{brief}",
                    f".assay/journal/{brief}",
                ],
                capture_output=True,
                check=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
            folder = Path(tmp) / ".assay" / "journal" / brief
            return [
                load_packed(folder, e["out"])
                for e in read_journal(folder).entries
                if e["kind"] == "step" and e.get("name") == name and e["status"] == "ok"
            ]

    def tree(self, brief: str) -> dict[str, str]:
        """``{path: blob sha}`` of the branch tip, journal excluded."""
        done = subprocess.run(
            ["git", f"--git-dir={self.forge_path}", "ls-tree", "-r", f"assay/{brief}"],
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

    def show(self, spec: str) -> str:
        """A file as the forge holds it (``git show <ref>:<path>`` in the bare repository)."""
        return subprocess.run(
            ["git", f"--git-dir={self.forge_path}", "show", spec],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    def merge_to_main(self, brief: str) -> None:
        """Fast-forward main to the brief's branch (what the gate's merge does)."""
        tip = self.branch_tip(brief)
        assert tip is not None
        subprocess.run(
            ["git", f"--git-dir={self.forge_path}", "update-ref", "refs/heads/main", tip],
            check=True,
        )

    def _cache(self) -> Path:
        return self.root / "test-cache"


def model_steps(journal: Journal) -> int:
    return sum(
        1
        for e in journal.entries
        if e["kind"] == "step" and e["step"] == "model" and e["status"] == "ok"
    )


def pids_alive(needle: str) -> list[int]:
    """Processes whose command line mentions ``needle`` (e.g. the forge path)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            status = (entry / "status").read_text()
        except OSError:
            continue
        if needle in cmdline and "assay" in cmdline and "State:\tZ" not in status:
            found.append(int(entry.name))
    return found


class HoldingServer(FakeOpenAIServer):
    """The fake OpenAI server, holding chosen turns until released or abandoned.

    An abandoned request (its client was SIGKILLed) is answered with an error and not
    counted, so ``count`` is the number of completions a live desk received.
    """

    def __init__(self, responses: list[dict[str, Any]], *, hold_turns: set[int]) -> None:
        super().__init__(responses)
        self.hold_turns = set(hold_turns)
        self.held: list[int] = []
        self._gate = threading.Condition()
        self._abandoned = False
        self._let_go: set[int] = set()

    def handle(
        self, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, dict[str, str], Any]:
        turn = self.assistant_turns(body)
        if turn in self.hold_turns:
            self.hold_turns.discard(turn)
            with self._gate:
                self.held.append(turn)
                self._gate.notify_all()
                self._gate.wait_for(lambda: self._abandoned or turn in self._let_go, timeout=60)
                if turn not in self._let_go:
                    self._abandoned = False
                    return 503, {}, {"error": {"message": "abandoned: the client was killed"}}
        return super().handle(body, headers)

    def desk_model(self) -> dict[str, Any]:
        """A desk's ``model:`` that talks to this server (two attempts, no backoff)."""
        return {
            "adapter": "openai",
            "model": "m",
            "base_url": self.base_url,
            "api_key_env": None,
            "attempts": 2,
            "backoff_s": 0,
        }

    def let_go(self, turn: int) -> None:
        """Answer the held request of ``turn`` normally."""
        with self._gate:
            self._let_go.add(turn)
            self._gate.notify_all()

    def wait_held(self, turn: int) -> None:
        with self._gate:
            assert self._gate.wait_for(lambda: turn in self.held, timeout=60), self.held

    def abandon(self) -> None:
        with self._gate:
            self._abandoned = True
            self._gate.notify_all()


def count_pushes(forge_path: Path) -> Path:
    """A pre-receive hook writing one line per push (its refs): the forge's push counter."""
    log = forge_path.parent / "pushes.log"
    hook = forge_path / "hooks" / "pre-receive"
    hook.write_text(
        "#!/usr/bin/env python3\nimport sys\n"
        "refs = [line.split()[2] for line in sys.stdin.read().splitlines() if line.strip()]\n"
        f"open({str(log)!r}, 'a').write(' '.join(refs) + '\\n')\n",
        encoding="utf-8",
    )
    hook.chmod(0o755)
    return log


def push_gate(forge_path: Path, *, nth: int) -> tuple[Path, Path]:
    """A pre-receive hook that holds the ``nth`` push to a brief branch, then refuses it.

    Returns ``(arrived, release)``: the hook creates ``arrived`` when the push is inside
    it, and waits for ``release`` to exist.
    """
    control = Path(tempfile.mkdtemp(prefix="push-gate-", dir=forge_path.parent))
    arrived, release = control / "arrived", control / "release"
    hook = forge_path / "hooks" / "pre-receive"
    hook.write_text(
        f"""#!/usr/bin/env python3
import os, sys, time
lines = sys.stdin.read().split("\\n")
if not any(" refs/heads/assay/" in line for line in lines):
    sys.exit(0)
counter = {str(control / "count")!r}
n = int(open(counter).read()) + 1 if os.path.exists(counter) else 1
open(counter, "w").write(str(n))
if n != {nth}:
    sys.exit(0)
open({str(arrived)!r}, "w").close()
while not os.path.exists({str(release)!r}):
    time.sleep(0.02)
sys.exit(1)
""",
        encoding="utf-8",
    )
    hook.chmod(0o755)
    return arrived, release


__all__ = [
    "HoldingServer",
    "World",
    "brief_text",
    "call",
    "finish",
    "model_steps",
    "pids_alive",
    "push_gate",
    "wait_until",
    "write",
]
