"""Many briefs ready to merge on a real bare repository, made directly (no desk runs).

``Fleet(root, names)`` puts each brief on main (one row: ``python3 check_<brief>.py``,
its check file on main too), and for each one pushes the desk's branch (its module and a
real journal with an ``evidence.claimed`` step), settles its claim on the journal's head
and opens a ready review record; ``verify_all`` runs the gate's ``verify`` on each.
``copy_to`` gives a test its own copy of the whole forge, so one module builds and
verifies the fleet once.

Two roles make a combined tree fail where each branch alone passes: the ``victim``'s
module reads ``shared.BASE`` (1 on main), and the ``breaker`` changes ``shared.py`` to
``BASE = 2``; stacked together, the victim's row fails and the breaker's still passes.
Briefs named ``clash…`` each rewrite ``README.md``: the second of two does not merge onto
the first. The ``envy`` brief declares ``requirements.lock`` in its env, and ``locker``
changes that file: on their combined tree envy's environment is not the one it verified in.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from assay.claims import ClaimStore
from assay.evidence.fingerprint import fingerprint
from assay.evidence.gate import verify
from assay.forge import open_forge
from assay.journal import JournalWriter, read_journal
from tests.evidence.gatekit import GIT_ENV, append_claimed, git

VICTIM = "victim"
BREAKER = "breaker"
CLASH = "clash"  # briefs named clash*: each rewrites README.md, so two of them conflict
CHEATER = "cheater"  # rewrites the victim's check file to pass whatever it imports
ENVY = "envy"  # declares the lock file requirements.lock in its env
LOCKER = "locker"  # changes requirements.lock: the fingerprint envy verified at moves
# A post-receive hook that logs each push: its ref lines, then a line "--".
PUSH_LOG_HOOK = '#!/bin/sh\ncat >> "{log}"\necho -- >> "{log}"\n'


def brief_text(name: str) -> str:
    env = "env: {lock: requirements.lock}\n" if name == ENVY else ""
    return (
        f"---\nid: {name}\ntitle: Add {name}\nverify:\n  - id: unit\n"
        f"    run: python3 check_{name}.py\n{env}---\nAdd {name}.py with f() == 2.\n"
    )


def module_text(name: str) -> str:
    if name == VICTIM:
        return "import shared\n\n\ndef f():\n    return shared.BASE + 1\n"
    if name == BREAKER:
        return "import shared\n\n\ndef f():\n    return shared.BASE\n"
    return "def f():\n    return 2\n"


def check_text(name: str) -> str:
    return f"import {name}\nassert {name}.f() == 2, '{name} is wrong'\nprint('ok')\n"


class Fleet:
    """A forge whose main holds ``names``' briefs, each with a ready review to merge."""

    def __init__(self, root: Path, names: Sequence[str]) -> None:
        self.root = root
        self.names = list(names)
        self.forge = root / "forge.git"
        git("init", "--quiet", "--bare", "--initial-branch=main", str(self.forge))
        author = root / "author"
        git("clone", "--quiet", str(self.forge), str(author))
        git("checkout", "--quiet", "-b", "main", cwd=author)
        files = {
            "shared.py": "BASE = 1\n",
            "README.md": "fleet\n",
            "requirements.lock": "pytest==8.0\n",
        }
        for name in self.names:
            files[f"briefs/{name}.md"] = brief_text(name)
            files[f"check_{name}.py"] = check_text(name)
        _write(author, files)
        git("add", "-A", cwd=author)
        git("commit", "--quiet", "-m", "briefs", cwd=author)
        git("push", "--quiet", "origin", "main", cwd=author)
        self.heads: dict[str, str] = {}
        desk = root / "desk"
        git("clone", "--quiet", str(self.forge), str(desk))
        with open_forge(str(self.forge), cache_dir=root / "claimer") as forge:
            store = ClaimStore(forge)
            for name in self.names:
                self.heads[name] = self._desk_branch(desk, store, name)
                self._open_review(name, self.heads[name])

    def _desk_branch(self, desk: Path, store: ClaimStore, name: str) -> str:
        git("checkout", "--quiet", "-B", f"assay/{name}", "origin/main", cwd=desk)
        files = {f"{name}.py": module_text(name)}
        if name == BREAKER:
            files["shared.py"] = "BASE = 2\n"
        if name == CHEATER:
            files[f"check_{VICTIM}.py"] = "print('ok')\n"
        if name == LOCKER:
            files["requirements.lock"] = "pytest==8.1\n"
        if name.startswith(CLASH):
            files["README.md"] = f"fleet, as {name} has it\n"
        _write(desk, files)
        journal = desk / ".assay" / "journal" / name
        writer = JournalWriter.open(journal, run_id=f"run-{name}")
        try:
            writer.append({"kind": "start", "desk": "coder"})
            # The desk's own fingerprint, which a brief declaring an env must record.
            fp = fingerprint({"lock": "requirements.lock"}, desk) if name == ENVY else {}
            append_claimed(writer, {"unit": "pass"}, fp)
        finally:
            writer.close()
        git("add", "-A", cwd=desk)
        git("commit", "--quiet", "-m", f"work on {name}", cwd=desk)
        git("push", "--quiet", "origin", f"assay/{name}", cwd=desk)
        claim = store.set_waiting(store.acquire(name, "coder", lease_s=600), "gate")
        store.renew(claim, journal_head=read_journal(journal).head)
        return git("rev-parse", "HEAD", cwd=desk)

    def _open_review(self, name: str, head: str) -> None:
        record: dict[str, Any] = {
            "v": 1,
            "brief": name,
            "branch": f"assay/{name}",
            "head_sha": head,
            "title": f"Add {name}",
            "body": f"Adds {name}.\n",
            "state": "ready",
            "updated_at": "2026-01-01T00:00:00Z",
        }
        gd = ["--git-dir", str(self.forge)]
        blob = git(*gd, "hash-object", "-w", "--stdin", input=json.dumps(record).encode())
        tree = git(*gd, "mktree", input=f"100644 blob {blob}\treview.json\n".encode())
        commit = git(*gd, "commit-tree", tree, "-m", "review")
        git(*gd, "update-ref", f"refs/assay/reviews/{name}", commit)

    def verify_all(self) -> None:
        with open_forge(str(self.forge), cache_dir=self.root / "gate-cache") as forge:
            for name in self.names:
                report = verify(forge, name, verifier="gate:ci")
                assert report.passed, (name, report.to_json())

    def copy_to(self, where: Path) -> Path:
        """A copy of the forge at ``where`` (its own refs and objects)."""
        shutil.copytree(self.forge, where, symlinks=True)
        return where


def _write(tree: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = tree / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def ref(forge: Path, name: str) -> str | None:
    done = subprocess.run(
        ["git", "--git-dir", str(forge), "rev-parse", "--verify", "--quiet", name],
        capture_output=True,
        env=GIT_ENV,
        check=False,
    )
    return done.stdout.decode().strip() or None


def log_pushes(forge: Path) -> Path:
    """Install the push-logging ``post-receive`` hook in ``forge``; the log's path."""
    log = forge.parent / f"{forge.name}.pushes"
    hook = forge / "hooks" / "post-receive"
    hook.write_text(PUSH_LOG_HOOK.format(log=log))
    hook.chmod(0o755)
    return log


def pushes(log: Path) -> list[dict[str, tuple[str, str]]]:
    """Each logged push as ``{ref: (old, new)}``, oldest first."""
    if not log.exists():
        return []
    found: list[dict[str, tuple[str, str]]] = [{}]
    for line in log.read_text().splitlines():
        if line == "--":
            found.append({})
            continue
        old, new, name = line.split()
        found[-1][name] = (old, new)
    return [push for push in found if push]


def review(forge: Path, name: str) -> dict[str, Any]:
    text = git("--git-dir", str(forge), "show", f"refs/assay/reviews/{name}:review.json")
    loaded: dict[str, Any] = json.loads(text)
    return loaded
