"""An in-memory record backend: refs and commits in dicts, for fast tests of record logic.

It answers what the records layer asks of a forge (``assay.forge.records.RecordBackend``:
``refresh``, ``history``, ``read_blob(s)``, ``commit``, ``push``) by the same rules as the git
forge: a ref moves only while it is still at the value the update expects, else the push
loses (``PushOutcome.STALE``) and nothing moves; an atomic push moves every ref or none.
It also answers what the read model reads a forge by (``assay.forgestate.source.
SnapshotBackend``: an object reader, ancestry, paths), so ``read_snapshot`` and the board,
sweep and claims logic built on it run here too. It sits beside the git forge as dulwich's
``DictRefsContainer`` sits beside its ``DiskRefsContainer``: the same contract, no disk, no
process. The record tests run against both.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from assay.closing import Closing
from assay.plumbing import UNCHECKED, Identity, PushOutcome, PushResult, RefUpdate


@dataclass(frozen=True)
class _Commit:
    files: Mapping[str, bytes]
    parents: tuple[str, ...]


class MemoryForge:
    """Refs and commits of one forge, in this process only."""

    protects_custom_refs = True  # the embedded forge's rule: only the record's writer moves it
    url = display_url = "memory:"

    def __init__(self, *, state_dir: Path | None = None) -> None:
        # Where a reader keeps local state (parsed briefs, evidence tips seen), as the git
        # forge keeps it beside its cache; None: none kept.
        self.state_dir = state_dir
        self.refs: dict[str, str] = {}
        self._commits: dict[str, _Commit] = {}
        self._blobs: dict[str, bytes] = {}  # by git's blob id, as a tree names them
        self.pushes = 0  # pushes asked for, landed or not

    def refresh(
        self, refs: str | Sequence[str], *, listed_only: Sequence[str] = ()
    ) -> dict[str, str]:
        """The refs named (a name ending in ``/`` is a prefix) and where they point."""
        wanted = [refs] if isinstance(refs, str) else list(refs)
        return {
            ref: sha
            for ref, sha in self.refs.items()
            if any(ref == w or (w.endswith("/") and ref.startswith(w)) for w in wanted)
        }

    def history(self, tip: str, *, limit: int | None = None) -> list[str]:
        """Commits from ``tip`` back along first parents, newest first."""
        chain: list[str] = []
        at: str | None = tip
        while at is not None and (limit is None or len(chain) < limit):
            chain.append(at)
            parents = self._commits[at].parents
            at = parents[0] if parents else None
        return chain

    def read_blob(self, commit: str, path: str) -> bytes | None:
        found = self._commits.get(commit)
        return None if found is None else found.files.get(path)

    def read_blobs(self, wanted: Sequence[tuple[str, str]]) -> list[bytes | None]:
        return [self.read_blob(commit, path) for commit, path in wanted]

    def commit(
        self,
        files: Mapping[str, bytes],
        *,
        parents: Sequence[str],
        message: str,
        author: Identity,
        committer: Identity | None = None,
    ) -> str:
        """Store a commit whose tree is exactly ``files``; its sha names its whole content."""
        missing = [p for p in parents if p not in self._commits]
        if missing:
            raise KeyError(f"no commit {missing[0]} in this forge")
        content = json.dumps(
            {
                "files": {name: data.hex() for name, data in sorted(files.items())},
                "parents": list(parents),
                "message": message,
                "author": [author.name, author.email],
            }
        )
        sha = hashlib.sha1(content.encode()).hexdigest()
        self._commits[sha] = _Commit(dict(files), tuple(parents))
        for data in files.values():
            self._blobs[blob_id(data)] = data
        return sha

    # -- what the read model asks (assay.forgestate.source.SnapshotBackend)

    def batch(self) -> MemoryBatch:
        return MemoryBatch(self)

    def has_commit(self, sha: str) -> bool:
        return sha in self._commits

    def ancestors(self, tip: str) -> set[str]:
        """Every commit ``tip`` reaches along all parents, itself included."""
        seen: set[str] = set()
        todo = [tip]
        while todo:
            sha = todo.pop()
            if sha in seen or sha not in self._commits:
                continue
            seen.add(sha)
            todo.extend(self._commits[sha].parents)
        return seen

    def is_ancestor(self, older: str, newer: str) -> bool:
        return older in self.ancestors(newer)

    def reached_from(self, main: str, tips: Sequence[str]) -> list[str]:
        reached = self.ancestors(main)
        return [tip for tip in tips if tip in reached]

    def has_paths(self, wanted: Sequence[tuple[str, str]]) -> list[bool]:
        """Whether each ``(commit, path)`` names a file or a folder of that commit."""
        found = []
        for commit, path in wanted:
            files = self._commits[commit].files if commit in self._commits else {}
            folder = path.rstrip("/") + "/"
            found.append(path in files or any(name.startswith(folder) for name in files))
        return found

    def push(self, updates: Sequence[RefUpdate], *, atomic: bool = True) -> PushResult:
        """Compare-and-swap every update: all of them or, with one stale, none (atomic)."""
        self.pushes += 1
        outcomes: dict[str, PushOutcome] = {}
        for update in updates:
            current = self.refs.get(update.ref)
            if update.new is not None and update.new not in self._commits:
                outcomes[update.ref] = PushOutcome.REJECTED
            elif update.expected is not UNCHECKED and current != update.expected:
                outcomes[update.ref] = PushOutcome.STALE
        failed = next((o for o in outcomes.values()), None)
        if failed is not None and atomic:
            refused = {u.ref: outcomes.get(u.ref, PushOutcome.REJECTED) for u in updates}
            return PushResult(failed, refused, detail="the forge's refs moved: nothing landed")
        for update in updates:
            if update.ref in outcomes:
                continue
            outcomes[update.ref] = self._move(update)
        overall = failed or next(iter(outcomes.values()), PushOutcome.UP_TO_DATE)
        return PushResult(overall, outcomes)

    def _move(self, update: RefUpdate) -> PushOutcome:
        current = self.refs.get(update.ref)
        if update.new is None:
            self.refs.pop(update.ref, None)
            return PushOutcome.DELETED
        if current == update.new:
            return PushOutcome.UP_TO_DATE
        self.refs[update.ref] = update.new
        if current is None:
            return PushOutcome.CREATED
        ancestors = set(self.history(update.new))
        return PushOutcome.FAST_FORWARD if current in ancestors else PushOutcome.FORCED


def blob_id(data: bytes) -> str:
    """The id git gives a blob of ``data`` (so a tree entry names it as git's would)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class MemoryBatch(Closing):
    """``GitBatch``'s reads (``blob``, ``tree``, ``parents``) over a ``MemoryForge``."""

    def __init__(self, forge: MemoryForge) -> None:
        self._forge = forge

    def parents(self, sha: str) -> tuple[str, ...] | None:
        found = self._forge._commits.get(sha)
        return None if found is None else found.parents

    def blob(self, spec: str) -> bytes | None:
        """A blob by its id, or ``<commit>:<path>``."""
        sha, colon, path = spec.partition(":")
        if not colon:
            return self._forge._blobs.get(sha)
        found = self._forge._commits.get(sha)
        return None if found is None else found.files.get(path)

    def tree(self, spec: str) -> dict[str, tuple[str, str]] | None:
        """The entries ``name -> (mode, id)`` of folder ``<commit>:<path>``, as git lists
        them (a sub-folder's id names it for this reader alone); None when absent."""
        sha, _, path = spec.partition(":")
        found = self._forge._commits.get(sha)
        if found is None:
            return None
        folder = path.strip("/") + "/" if path.strip("/") else ""
        entries: dict[str, tuple[str, str]] = {}
        for name, data in found.files.items():
            if not name.startswith(folder):
                continue
            head, below, _ = name[len(folder) :].partition("/")
            if below:
                entries[head] = ("40000", f"{sha}:{folder}{head}")
            else:
                entries[head] = ("100644", blob_id(data))
        return entries or None

    def close(self) -> None:
        return None


if TYPE_CHECKING:  # mypy holds MemoryForge to the contracts it stands in for
    from assay.forge.records import RecordBackend

    _CONFORMS: RecordBackend = MemoryForge()
