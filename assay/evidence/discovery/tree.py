"""What every discovery rule works on: a commit's files, the set being found, paths, words.

``Tree`` is one commit's files as paths; ``Acceptance`` is what the rules find (named paths,
whole folders, configuration, collected tests, the runners); the path helpers keep every
path relative to the tree's root and never let one leave it; ``simple_commands`` splits a
row as the shell would.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

_OPERATORS = frozenset({"&&", "||", ";", "|", "&", ";;", "(", ")", "|&"})
# Programs that run the command after their own options (``env -i pytest``, ``time make``).
_WRAPPERS = ("env", "exec", "time", "nice", "timeout", "xvfb-run")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


class Tree:
    """The files of one commit, as a set of paths, with the folder questions discovery asks."""

    def __init__(self, files: Iterable[str]) -> None:
        self.files = set(files)
        self.dirs = {posixpath.dirname(f) for f in self.files}
        for folder in list(self.dirs):
            while folder:
                folder = posixpath.dirname(folder)
                self.dirs.add(folder)

    def has_dir(self, path: str) -> bool:
        return path in self.dirs and path != ""

    def under(self, folder: str) -> list[str]:
        if not folder:
            return sorted(self.files)
        prefix = folder + "/"
        return sorted(f for f in self.files if f.startswith(prefix))


@dataclass
class Acceptance:
    """What one brief's rows collect and read: the pure result of discovery."""

    named: set[str] = field(default_factory=set)  # paths a row names literally
    dirs: set[str] = field(default_factory=set)  # folders pinned whole
    config: set[str] = field(default_factory=set)  # runner configuration, at every level
    collected: set[str] = field(default_factory=set)  # test files found by a runner's rules
    runners: set[str] = field(default_factory=set)  # "pytest", "unittest", "go", ...
    _patterns: list[tuple[str, Callable[[str], bool], bool]] = field(default_factory=list)

    def collect(self, folder: str, match: Callable[[str], bool], *, config: bool = False) -> None:
        """Every file under ``folder`` (on main or the branch) whose path relative to it
        ``match``es: tests, or (``config``) configuration found on the way to them."""
        self._patterns.append((folder, match, config))

    def config_at_levels(self, folder: str, match: Callable[[str], bool]) -> None:
        """Configuration whose name ``match``es, in ``folder`` and every folder above it
        (names that are patterns, such as ``tsconfig*.json``)."""
        for level in ancestors(inside(folder, "x")):
            self.collect(level, lambda rel: "/" not in rel and match(rel), config=True)

    def has_tests_on(self, main: Tree) -> bool:
        """Whether main has any test this acceptance set names or collects."""
        return bool((self.named | self.collected) & main.files) or any(
            main.has_dir(d) for d in self.dirs
        )

    def resolve(self, *trees: Tree) -> None:
        """Turn the discovery patterns into the files of ``trees`` they match."""
        for tree in trees:
            for folder, match, config in self._patterns:
                for path in tree.under(folder):
                    if any(p.startswith(".") or p == "node_modules" for p in path.split("/")[:-1]):
                        continue  # the journal, a virtualenv, installed packages
                    if match(path[len(folder) + 1 :] if folder else path):
                        (self.config if config else self.collected).add(path)


def join(cwd: str, path: str) -> str | None:
    """``path`` relative to the tree's root, or None when it leaves the tree."""
    if path.startswith("/") or path.startswith("~"):
        return None
    joined = posixpath.normpath(posixpath.join(cwd, path)) if cwd else posixpath.normpath(path)
    if joined == ".":
        return ""
    if joined.startswith("../") or joined == "..":
        return None
    return joined


def ancestors(path: str) -> list[str]:
    """``path``'s folder and every folder above it, down from the root ("" first)."""
    found = [""]
    parts = path.split("/")[:-1] if path else []
    for depth in range(1, len(parts) + 1):
        found.append("/".join(parts[:depth]))
    return found


def inside(folder: str, name: str) -> str:
    """``name`` in ``folder`` ("" is the root)."""
    return f"{folder}/{name}" if folder else name


def simple_commands(command: str) -> list[list[str]]:
    """The row split as the shell would into simple commands (assignments dropped)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        words = list(lexer)
    except ValueError:
        words = command.split()
    commands: list[list[str]] = [[]]
    for word in words:
        if word in _OPERATORS or (word and set(word) <= set("&|;()")):
            commands.append([])
        elif word and set(word) <= set("<>") | set("0123456789&"):
            commands[-1].append(">")  # a redirection: its target is not a test
        else:
            commands[-1].append(word)
    cleaned = []
    for argv in commands:
        while argv and _ASSIGNMENT.match(argv[0]):
            argv = argv[1:]
        if argv and argv[0] in _WRAPPERS:
            argv = argv[1:]
            while argv and (argv[0].startswith("-") or "=" in argv[0] or argv[0][:1].isdigit()):
                argv = argv[1:]
        if argv:
            cleaned.append(argv)
    return cleaned
