"""One brief's rows walked command by command, each matched to the runner it starts.

``Discovery`` splits a row as the shell would (``&&``, ``;``, ``|``, ``cd DIR``), follows
what runs other commands (``make``'s recipe, ``tox``'s commands, a ``package.json``
script, ``uv run``, ``npx``) and hands each runner to its rules (``python``, ``js``,
``native``, ``make``). Any other word of a command is a path only when main or the branch
has it: ``grep -qx HELLO hello.txt`` names ``hello.txt``, never ``HELLO`` (nor
``hello/txt.py``).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable

from assay.evidence.discovery import js, native, python
from assay.evidence.discovery.make import make
from assay.evidence.discovery.tree import Acceptance, Tree, join, simple_commands

_ENV_RUNNERS = ("uv", "poetry", "pdm", "hatch", "pipenv")


class Discovery:
    """Discovery of one brief's rows against main at the base (``main``) and the branch."""

    def __init__(self, main: Tree, branch: Tree, *, read: Callable[[str], str | None]) -> None:
        self.main = main
        self.branch = branch
        self._read = read
        self.found = Acceptance()

    def read(self, path: str) -> str | None:
        """Main's text of ``path`` at the base, or None when main has no such file."""
        return self._read(path) if path in self.main.files else None

    def exists(self, path: str) -> bool:
        return path in self.main.files or path in self.branch.files

    def is_dir(self, path: str) -> bool:
        return path == "" or self.main.has_dir(path) or self.branch.has_dir(path)

    def row(self, command: str) -> None:
        self.commands(simple_commands(command), cwd="", depth=0)

    def commands(self, commands: Iterable[list[str]], *, cwd: str, depth: int) -> None:
        for argv in commands:
            if argv[0] == "cd":
                target = join(cwd, argv[1]) if len(argv) > 1 else ""
                cwd = target if target is not None else cwd
                continue
            self.command(argv, cwd=cwd, depth=depth)

    def command(self, argv: list[str], *, cwd: str, depth: int) -> None:
        program = posixpath.basename(argv[0])
        rest = argv[1:]
        if program in _ENV_RUNNERS and rest[:1] == ["run"]:
            self.command(rest[1:] or ["true"], cwd=cwd, depth=depth)
        elif program == "coverage" and rest[:1] == ["run"]:
            python.python(self, ["python", *rest[1:]], cwd=cwd, depth=depth)
        elif python.PYTHON_PROGRAM.match(program):
            python.python(self, argv, cwd=cwd, depth=depth)
        elif program in ("pytest", "py.test"):
            python.pytest(self, rest, cwd=cwd)
        elif program in ("make", "gmake"):
            make(self, rest, cwd=cwd, depth=depth)
        elif program == "tox":
            python.tox(self, cwd=cwd, depth=depth)
        elif program == "nox":
            python.nox(self, cwd=cwd)
        elif program == "go" and rest[:1] == ["test"]:
            native.go(self, rest[1:], cwd=cwd)
        elif program == "cargo":
            self._cargo(rest, cwd=cwd)
        elif program == "node":
            js.node(self, rest, cwd=cwd, depth=depth)
        elif program == "jest":
            js.jest(self, rest, cwd=cwd)
        elif program == "vitest":
            js.vitest(self, rest, cwd=cwd)
        elif program in js.JS_PROGRAMS:
            js.package_manager(self, program, rest, cwd=cwd, depth=depth)
        else:
            self.words(rest, cwd=cwd)

    def _cargo(self, args: list[str], *, cwd: str) -> None:
        """``cargo [+TOOLCHAIN] [-C DIR] test ARGS``; any other cargo command names files."""
        words = list(args)
        while words and (words[0].startswith("+") or words[0] in ("-C", "--locked", "-q")):
            if words.pop(0) == "-C" and words:
                cwd = join(cwd, words.pop(0)) or cwd
        if words[:1] == ["test"]:
            native.cargo(self, words[1:], cwd=cwd)
        else:
            self.words(words, cwd=cwd)

    def words(self, words: Iterable[str], *, cwd: str) -> None:
        """Words of a command no runner rule knows: a path only when a tree has it."""
        for word in words:
            value = word.split("=", 1)[1] if word.startswith("-") and "=" in word else word
            if not value or value.startswith("-") or value == ">":
                continue
            path = join(cwd, value.split("::", 1)[0])
            if path is None or path == "":
                continue
            if path in self.main.files or path in self.branch.files:
                self.found.named.add(path)
            elif self.main.has_dir(path):
                self.found.dirs.add(path)


def discover(
    commands: Iterable[str], *, main: Tree, branch: Tree, read: Callable[[str], str | None]
) -> Acceptance:
    """The acceptance set of ``commands`` (each row's text) against both trees."""
    discovery = Discovery(main, branch, read=read)
    for command in commands:
        discovery.row(command)
    discovery.found.resolve(main, branch)
    return discovery.found


def row_runners(
    command: str, *, main: Tree, branch: Tree, read: Callable[[str], str | None]
) -> tuple[tuple[str, ...], bool]:
    """The runners one row starts (``make test`` running pytest: ``("make", "pytest")``),
    and whether main has any of the tests it would run (else main runs none there)."""
    found = discover([command], main=main, branch=branch, read=read)
    return tuple(sorted(found.runners)), found.has_tests_on(main)
