"""Reading many objects out of a local git repository through one ``git cat-file --batch``.

A board of 1,000 briefs reads thousands of small objects (claim records, journal segments,
brief files). One long-lived ``cat-file --batch`` process answers them all over a pipe,
instead of one git subprocess each. Only the forge's local cache is read: fetching is the
forge's job, and happens once, before.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import IO

from assay.closing import Closing
from assay.errors import ForgeUnavailable
from assay.plumbing import git_env


class GitBatch(Closing):
    """Objects of one repository by ``<rev>:<path>`` or sha; use as a context manager."""

    def __init__(self, repository: Path) -> None:
        env = git_env()
        try:
            self._process = subprocess.Popen(
                ["git", "-C", str(repository), "cat-file", "--batch"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
            )
        except OSError as exc:
            raise ForgeUnavailable(f"cannot run git on {repository}: {exc}") from exc
        assert self._process.stdin is not None and self._process.stdout is not None
        self._in: IO[bytes] = self._process.stdin
        self._out: IO[bytes] = self._process.stdout

    def read(self, spec: str) -> tuple[str, bytes] | None:
        """``(type, content)`` of the object ``spec`` names, or None when it does not exist."""
        if "\n" in spec:
            return None
        self._in.write(spec.encode("utf-8") + b"\n")
        self._in.flush()
        header = self._out.readline()
        if not header:
            raise ForgeUnavailable("git cat-file --batch ended unexpectedly")
        fields = header.split()
        if len(fields) != 3:  # "<spec> missing" or "<spec> ambiguous"
            return None
        size = int(fields[2])
        content = self._out.read(size)
        self._out.read(1)  # the newline after every object
        return fields[1].decode("ascii"), content

    def blob(self, spec: str) -> bytes | None:
        """The content of a blob, or None when it is missing or not a blob."""
        found = self.read(spec)
        return found[1] if found and found[0] == "blob" else None

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
        if self._process.poll() is None:
            self._in.close()
            self._process.wait(timeout=10)
        self._out.close()
