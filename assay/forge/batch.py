"""Reading many objects out of a local git repository in process (libgit2, ``assay.odb``).

A board of 1,000 briefs reads thousands of small objects (claim records, journal segments,
brief files). They are read from the forge's local cache through one libgit2 handle, with
``git cat-file --batch``'s addressing (a sha, or ``<rev>:<path>``) and no git process.
Only the local cache is read: fetching is the forge's job, and happens once, before.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from assay.closing import Closing
from assay.odb import repository

# The two shapes every reader uses, answered without libgit2's revision parser.
_SHA_AND_PATH = re.compile(r"([0-9a-f]{40})(?::(.*))?", re.DOTALL)


class GitBatch(Closing):
    """Objects of one repository by ``<rev>:<path>`` or sha; use as a context manager."""

    def __init__(self, repository_dir: Path) -> None:
        self._repo = repository(repository_dir)

    def read(self, spec: str) -> tuple[str, bytes] | None:
        """``(type, content)`` of the object ``spec`` names, or None when it does not exist."""
        if "\n" in spec:
            return None
        found = self._lookup(spec)
        return None if found is None else (found.type_str, found.read_raw())

    def _lookup(self, spec: str) -> Any:
        import pygit2

        shape = _SHA_AND_PATH.fullmatch(spec)
        try:
            if shape is None:
                return self._repo.revparse_single(spec)
            sha, path = shape.groups()
            found = self._repo[sha]
            if path is None:
                return found
            tree = found.peel(pygit2.Tree)
            return self._repo[tree[path].id] if path else tree
        except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
            return None

    def blob(self, spec: str) -> bytes | None:
        """The content of a blob, or None when it is missing or not a blob."""
        found = self.read(spec)
        return found[1] if found and found[0] == "blob" else None

    def parents(self, sha: str) -> tuple[str, ...] | None:
        """The parents of commit ``sha``, or None when it is not a commit here."""
        import pygit2

        found = self._lookup(sha)
        if not isinstance(found, pygit2.Commit):
            return None
        return tuple(str(parent) for parent in found.parent_ids)

    def tree(self, spec: str) -> dict[str, tuple[str, str]] | None:
        """A tree's entries ``name -> (mode, sha)``, or None when it is missing."""
        found = self.read(spec)
        if not found or found[0] != "tree":
            return None
        entries: dict[str, tuple[str, str]] = {}
        data = found[1]
        position = 0
        while position < len(data):
            space = data.index(b" ", position)
            nul = data.index(b"\0", space)
            mode = data[position:space].decode("ascii")
            name = data[space + 1 : nul].decode("utf-8", errors="replace")
            sha = data[nul + 1 : nul + 21].hex()
            entries[name] = (mode, sha)
            position = nul + 21
        return entries

    def close(self) -> None:
        """Nothing to release: the libgit2 handle is the thread's, reused (``assay.odb``)."""
