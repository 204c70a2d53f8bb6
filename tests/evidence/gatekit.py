"""A real embedded forge for gate tests: a bare repository, an author and a desk clone.

Everything is real git: main is pushed from an author clone, the desk works in its own
clone, writes a real journal (``JournalWriter``) with an ``evidence.claimed`` step, pushes
its branch, and opens a review record on ``refs/assay/reviews/<brief>``.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from assay.claims import Claim, ClaimStore
from assay.evidence.fingerprint import fingerprint
from assay.evidence.records import EvidenceRecord
from assay.forge import open_forge
from assay.journal import JournalWriter, read_journal

BRIEF = "calc"

GIT_ENV = {
    "GIT_AUTHOR_NAME": "tester",
    "GIT_AUTHOR_EMAIL": "tester@example.invalid",
    "GIT_COMMITTER_NAME": "tester",
    "GIT_COMMITTER_EMAIL": "tester@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent-assay-home",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
}

BRIEF_TEXT = """---
id: calc
title: Add calc.add
verify:
  - id: unit
    run: python3 check.py
  - id: lint
    run: test -f calc.py
env: {python: "3", lock: requirements.lock}
---
Add a function add(a, b) to calc.py.
"""

CHECK = "import calc\nassert calc.add(2, 2) == 4, 'add is wrong'\nprint('ok')\n"


def append_claimed(
    writer: JournalWriter, claims: Mapping[str, str], env_fingerprint: Mapping[str, str]
) -> None:
    """Append the desk's ``evidence.claimed`` step: each row's claimed result, its env."""
    rows = [{"row": row, "result": result, "note": ""} for row, result in claims.items()]
    packed, blobs = writer.pack({"rows": rows, "env_fingerprint": dict(env_fingerprint)})
    writer.append(
        {
            "kind": "step",
            "step": "compute",
            "name": "evidence.claimed",
            "status": "ok",
            "out": packed,
            "blobs": blobs,
        }
    )


def record(**fields: Any) -> EvidenceRecord:
    """An evidence record with plain values, ``fields`` overriding them (unsealed)."""
    values: dict[str, Any] = {
        "brief": "calc",
        "row": "unit",
        "command": "pytest -q",
        "exit": 0,
        "timed_out": False,
        "seconds": 0.1,
        "output_sha256": "sha256:0",
        "output_bytes": 0,
        "output_tail": "",
        "head_sha": "a" * 40,
        "env_fingerprint": {},
        "verifier": "gate:ci",
        "journal_head": "",
        "at": "t",
    }
    return EvidenceRecord(**{**values, **fields})


def git(*args: str, cwd: Path | None = None, input: bytes | None = None) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=GIT_ENV,
        input=input,
        capture_output=True,
        check=True,
        timeout=60,
    )
    return done.stdout.decode().strip()


class Scene:
    """A forge with one brief on main, and a desk that works on ``assay/calc``."""

    def __init__(self, root: Path, *, brief_text: str = BRIEF_TEXT, claims: bool = True) -> None:
        self.root = root
        self.claims = claims  # False: the desk pushes without ever claiming the brief
        self._claim: Claim | None = None
        self.forge = root / "forge.git"
        git("init", "--quiet", "--bare", "--initial-branch=main", str(self.forge))
        self.author = root / "author"
        git("clone", "--quiet", str(self.forge), str(self.author))
        git("checkout", "--quiet", "-b", "main", cwd=self.author)
        (self.author / "briefs").mkdir()
        self.author_push(
            {
                "briefs/calc.md": brief_text,
                "check.py": CHECK,
                "requirements.lock": "pytest==8.0\n",
                "README.md": "calc\n",
            },
            message="brief calc",
        )
        self.desk = root / "desk"
        git("clone", "--quiet", str(self.forge), str(self.desk))
        git("checkout", "--quiet", "-b", f"assay/{BRIEF}", cwd=self.desk)
        self.cache = root / "cache"

    def author_push(self, files: Mapping[str, str], *, message: str) -> None:
        """Write ``files`` in the author's clone and push them to main as one commit."""
        for name, text in files.items():
            (self.author / name).write_text(text)
        git("add", "-A", cwd=self.author)
        git("commit", "--quiet", "-m", message, cwd=self.author)
        git("push", "--quiet", "origin", "main", cwd=self.author)

    def main_sha(self) -> str | None:
        return self.ref("refs/heads/main")

    def ref(self, ref: str) -> str | None:
        done = subprocess.run(
            ["git", "--git-dir", str(self.forge), "rev-parse", "--verify", "--quiet", ref],
            capture_output=True,
            env=GIT_ENV,
            check=False,
        )
        return done.stdout.decode().strip() or None

    def desk_fingerprint(self) -> dict[str, str]:
        return fingerprint({"python": "3", "lock": "requirements.lock"}, self.desk)

    def desk_commit(
        self,
        files: Mapping[str, str],
        *,
        claims: Mapping[str, str] | None = None,
        env_fingerprint: Mapping[str, str] | None = None,
        message: str = "work",
    ) -> str:
        """Write files, append an evidence.claimed step to the journal, commit and push."""
        for name, text in files.items():
            path = self.desk / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        journal_dir = self.desk / ".assay" / "journal" / BRIEF
        writer = JournalWriter.open(journal_dir, run_id="run-1")
        try:
            if writer.seq == 0:
                writer.append({"kind": "start", "desk": "coder"})
            if claims is not None:
                fp = self.desk_fingerprint() if env_fingerprint is None else dict(env_fingerprint)
                append_claimed(writer, claims, fp)
        finally:
            writer.close()
        git("add", "-A", cwd=self.desk)
        git("commit", "--quiet", "-m", message, cwd=self.desk)
        git("push", "--quiet", "origin", f"assay/{BRIEF}", cwd=self.desk)
        if self.claims:
            self._settle_claim(journal_dir)
        return git("rev-parse", "HEAD", cwd=self.desk)

    def _settle_claim(self, journal_dir: Path) -> None:
        """Anchor the journal's head on the desk's claim and leave it settled (waiting for
        the gate), as a desk's run does at each stop: the gate judges only a run that a
        settled claim vouches for. The claim is taken at the first commit."""
        with open_forge(str(self.forge), cache_dir=self.root / "claimer") as forge:
            store = ClaimStore(forge)
            if self._claim is None:
                self._claim = store.set_waiting(store.acquire(BRIEF, "coder", lease_s=600), "gate")
            self._claim = store.renew(self._claim, journal_head=read_journal(journal_dir).head)

    def open_review(self, head: str, *, state: str = "ready", body: str = "Adds calc.\n") -> str:
        record: dict[str, Any] = {
            "v": 1,
            "brief": BRIEF,
            "branch": f"assay/{BRIEF}",
            "head_sha": head,
            "title": "Add calc.add",
            "body": body,
            "state": state,
            "updated_at": "2026-01-01T00:00:00Z",
        }
        gd = ["--git-dir", str(self.forge)]
        blob = git(*gd, "hash-object", "-w", "--stdin", input=json.dumps(record).encode())
        tree = git(*gd, "mktree", input=f"100644 blob {blob}\treview.json\n".encode())
        parent = self.ref(f"refs/assay/reviews/{BRIEF}")
        args = [*gd, "commit-tree", tree, "-m", "review"]
        if parent:
            args += ["-p", parent]
        commit = git(*args)
        git(*gd, "update-ref", f"refs/assay/reviews/{BRIEF}", commit)
        return commit

    def review(self) -> dict[str, Any]:
        data = git("--git-dir", str(self.forge), "show", f"refs/assay/reviews/{BRIEF}:review.json")
        loaded: dict[str, Any] = json.loads(data)
        return loaded

    def git_show(self, commit: str, path: str = "record.json") -> str:
        return git("--git-dir", str(self.forge), "show", f"{commit}:{path}")

    def evidence_commits(self) -> list[str]:
        ref = f"refs/assay/evidence/{BRIEF}"
        return git("--git-dir", str(self.forge), "rev-list", "--reverse", ref).split()
