"""The acceptance set: what a row's runner would collect and read, by the runner's own rules.

A row is parsed as the shell would split it (``&&``, ``;``, ``|``, ``cd DIR``) into simple
commands; each command is matched to the runner it starts and that runner's discovery
rules name the files it would collect and the configuration it would read:

- **pytest** (``pytest``, ``py.test``, ``python -m pytest``): the named files and folders,
  else the ini file's ``testpaths``, else the working folder; ``test_*.py`` and ``*_test.py``
  (or the ini file's ``python_files``) under them; ``conftest.py`` and ``__init__.py`` in
  every folder on the way; ``pytest.ini``, ``.pytest.ini``, ``tox.ini``, ``setup.cfg``,
  ``pyproject.toml`` in every folder from the root down (pytest reads the nearest first);
- **unittest** (``python -m unittest``): bare (``test_calc``) and dotted (``tests.test_x``)
  module names, file paths, ``discover`` with its ``-s``/``-p``/``-t`` (default ``test*.py``
  from the working folder), and each package's ``__init__.py`` (``load_tests``);
- **go test**: ``*_test.go`` and ``testdata/`` in the named packages (``./...`` recursive;
  never a flag's value, ``-run TestAdd``, nor what follows ``-args``; under ``-C DIR``),
  ``go.mod``, ``go.work`` at every level;
- **node** (``npm|yarn|pnpm test``, ``npx jest|vitest``, ``node --test``): ``*.test.*``,
  ``*.spec.*`` and ``__tests__/``, ``package.json`` at every level, jest, vitest and vite configs;
- **cargo test**: ``tests/`` and ``Cargo.toml``; ``.cargo/config.toml`` (or ``config``) and
  ``rust-toolchain.toml`` (or ``rust-toolchain``) at every level;
- **make** (``make [-C DIR] [-f FILE] [TARGET]``): the makefile, and the commands of the
  target's recipe (as main has them) discovered in turn; **tox** and **nox**: ``tox.ini`` /
  ``noxfile.py`` and the pytest rules.

Any other word of a command is a path only when main or the branch has it: ``grep -qx HELLO
hello.txt`` names ``hello.txt``, never ``HELLO`` (nor ``hello/txt.py``).
"""

from __future__ import annotations

import configparser
import fnmatch
import posixpath
import re
import shlex
import tomllib
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field

PYTEST_CONFIG = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
PYTHON_CONFIG = (*PYTEST_CONFIG, "conftest.py", "noxfile.py")
MAKEFILES = ("GNUmakefile", "makefile", "Makefile")
# go test's flags (its own, the build's and the test binary's) that take a value.
_GO_VALUE_FLAGS = frozenset(
    [
        "C",
        "run",
        "skip",
        "bench",
        "benchtime",
        "count",
        "cpu",
        "parallel",
        "timeout",
        "list",
        "shuffle",
        "fuzz",
        "fuzztime",
        "fuzzminimizetime",
        "coverprofile",
        "covermode",
        "coverpkg",
        "cpuprofile",
        "memprofile",
        "memprofilerate",
        "blockprofile",
        "blockprofilerate",
        "mutexprofile",
        "mutexprofilefraction",
        "outputdir",
        "trace",
        "exec",
        "o",
        "p",
        "tags",
        "mod",
        "modfile",
        "overlay",
        "pkgdir",
        "gcflags",
        "ldflags",
        "asmflags",
        "gccgoflags",
        "buildmode",
        "compiler",
        "installsuffix",
        "toolexec",
        "vet",
    ]
)
CARGO_CONFIG = (".cargo/config.toml", ".cargo/config", "rust-toolchain.toml", "rust-toolchain")
NODE_CONFIG = tuple(
    f"{stem}.config.{ext}"
    for stem in ("jest", "vitest", "vite")
    for ext in ("js", "ts", "mjs", "cjs", "mts", "cts", "json")
)
_PYTEST_FILES = ("test_*.py", "*_test.py")
_UNITTEST_PATTERN = "test*.py"
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_NODE_TEST = re.compile(r"\.(test|spec)\.[cm]?[jt]sx?$")
_OPERATORS = frozenset({"&&", "||", ";", "|", "&", ";;", "(", ")", "|&"})
# pytest options that take a value as the next word (so that word is not a test path).
_PYTEST_VALUED = frozenset(
    {
        "-k", "-m", "-p", "-o", "-W", "-n", "-r", "--maxfail", "--tb", "--rootdir",
        "--deselect", "--junitxml", "--junit-xml", "--confcutdir", "--basetemp", "--durations",
        "--log-level", "--import-mode", "--override-ini", "--cov", "--dist",
    }
)  # fmt: skip
_PYTHON_VALUED = frozenset({"-W", "-X", "-Q"})
_MAKE_ASSIGN = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*[:?+]?=\s*(.*)$")
_MAKE_RULE = re.compile(r"^([^\s:=#][^:=#]*?)\s*::?(?!=)\s*(.*)$")
_MAKE_VAR = re.compile(r"\$[({]([A-Za-z_][A-Za-z0-9_]*)[)}]")
_MAX_MAKE_DEPTH = 8


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
        """Every file under ``folder`` (on main or the branch) whose name ``match``es: tests,
        or (``config``) configuration found on the way to them."""
        self._patterns.append((folder, match, config))

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


def _join(cwd: str, path: str) -> str | None:
    """``path`` relative to the tree's root, or None when it leaves the tree."""
    if path.startswith("/") or path.startswith("~"):
        return None
    joined = posixpath.normpath(posixpath.join(cwd, path)) if cwd else posixpath.normpath(path)
    if joined == ".":
        return ""
    if joined.startswith("../") or joined == "..":
        return None
    return joined


def _ancestors(path: str) -> list[str]:
    """``path``'s folder and every folder above it, down from the root ("" first)."""
    found = [""]
    parts = path.split("/")[:-1] if path else []
    for depth in range(1, len(parts) + 1):
        found.append("/".join(parts[:depth]))
    return found


def _in(folder: str, name: str) -> str:
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
        while argv and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", argv[0]):
            argv = argv[1:]
        if argv and argv[0] in ("env", "exec", "time", "nice", "timeout", "xvfb-run"):
            argv = argv[1:]
            while argv and (argv[0].startswith("-") or "=" in argv[0] or argv[0][:1].isdigit()):
                argv = argv[1:]
        if argv:
            cleaned.append(argv)
    return cleaned


class Discovery:
    """Discovery of one brief's rows against main at the base (``main``) and the branch."""

    def __init__(self, main: Tree, branch: Tree, *, read: Callable[[str], str | None]) -> None:
        self.main = main
        self.branch = branch
        self.read = read  # main's text of a file at the base, or None
        self.found = Acceptance()

    def exists(self, path: str) -> bool:
        return path in self.main.files or path in self.branch.files

    def is_dir(self, path: str) -> bool:
        return path == "" or self.main.has_dir(path) or self.branch.has_dir(path)

    def row(self, command: str) -> None:
        self.commands(simple_commands(command), cwd="", depth=0)

    def commands(self, commands: Iterable[list[str]], *, cwd: str, depth: int) -> None:
        for argv in commands:
            if argv[0] == "cd":
                target = _join(cwd, argv[1]) if len(argv) > 1 else ""
                cwd = target if target is not None else cwd
                continue
            self.command(argv, cwd=cwd, depth=depth)

    def command(self, argv: list[str], *, cwd: str, depth: int) -> None:
        program = posixpath.basename(argv[0])
        rest = argv[1:]
        if program in ("uv", "poetry", "pdm", "hatch", "pipenv") and rest[:1] == ["run"]:
            self.command(rest[1:] or ["true"], cwd=cwd, depth=depth)
        elif program == "coverage" and rest[:1] == ["run"]:
            self.python(["python", *rest[1:]], cwd=cwd, depth=depth)
        elif _PYTHON.match(program):
            self.python(argv, cwd=cwd, depth=depth)
        elif program in ("pytest", "py.test"):
            self.pytest(rest, cwd=cwd)
        elif program in ("make", "gmake"):
            self.make(rest, cwd=cwd, depth=depth)
        elif program == "tox":
            self.found.config.add(_in(cwd, "tox.ini"))
            self.ini_commands(_in(cwd, "tox.ini"), "testenv", cwd=cwd, depth=depth)
            self.pytest([], cwd=cwd)
        elif program == "nox":
            self.found.config.add(_in(cwd, "noxfile.py"))
            self.pytest([], cwd=cwd)
        elif program == "go" and rest[:1] == ["test"]:
            self.go(rest[1:], cwd=cwd)
        elif program == "cargo" and rest[:1] == ["test"]:
            self.found.runners.add("cargo")
            self.found.config.add(_in(cwd, "Cargo.toml"))
            # cargo reads .cargo/config.toml at every level up from where it runs (its
            # build target, rustflags, environment); rust-toolchain.toml picks the compiler
            for level in _ancestors(_in(cwd, "x")):
                for name in CARGO_CONFIG:
                    self.found.config.add(_in(level, name))
            self.found.collect(_in(cwd, "tests") if cwd else "tests", lambda _p: True)
        elif program in ("npm", "yarn", "pnpm", "npx", "jest", "vitest", "node", "bun"):
            self.node(program, rest, cwd=cwd)
        else:
            self.words(rest, cwd=cwd)

    def words(self, words: Iterable[str], *, cwd: str) -> None:
        """Words of a command no runner rule knows: a path only when a tree has it."""
        for word in words:
            value = word.split("=", 1)[1] if word.startswith("-") and "=" in word else word
            if not value or value.startswith("-") or value == ">":
                continue
            path = _join(cwd, value.split("::", 1)[0])
            if path is None or path == "":
                continue
            if path in self.main.files or path in self.branch.files:
                self.found.named.add(path)
            elif self.main.has_dir(path):
                self.found.dirs.add(path)

    # -- Python ---------------------------------------------------------------------------

    def python(self, argv: list[str], *, cwd: str, depth: int) -> None:
        args = argv[1:]
        while args:
            word = args.pop(0)
            if word == "-m" and args:
                module, rest = args[0], args[1:]
                if module in ("pytest", "py.test"):
                    self.pytest(rest, cwd=cwd)
                elif module == "unittest":
                    self.unittest(rest, cwd=cwd)
                elif module == "tox":
                    self.command(["tox", *rest], cwd=cwd, depth=depth)
                else:
                    self.module(module, cwd=cwd)
                    self.words(rest, cwd=cwd)
                return
            if word == "-c":
                return
            if word in _PYTHON_VALUED:
                args = args[1:]
                continue
            if word.startswith("-"):
                continue
            self.words([word, *args], cwd=cwd)
            return

    def module(self, name: str, *, cwd: str) -> bool:
        """A module name (``test_calc``, ``tests.test_x.T.test_add``) as files; whether one
        was found. Each package's ``__init__.py`` comes with it."""
        if not _MODULE.match(name):
            return False
        parts = name.split(".")
        for depth in range(len(parts), 0, -1):
            stem = _join(cwd, "/".join(parts[:depth]))
            if stem is None:
                return False
            if self.exists(stem + ".py"):
                self.found.named.add(stem + ".py")
            elif self.is_dir(stem) and self.exists(stem + "/__init__.py"):
                self.found.dirs.add(stem)
            else:
                continue
            for up in range(1, depth):
                init = _join(cwd, "/".join(parts[:up]) + "/__init__.py")
                if init is not None:
                    self.found.config.add(init)
            return True
        return False

    def _inits(self, folder: str) -> None:
        """``__init__.py`` (its ``load_tests``) in ``folder`` and every folder above it."""
        for parent in _ancestors(_in(folder, "x")):
            if parent:
                self.found.config.add(_in(parent, "__init__.py"))

    def unittest(self, args: list[str], *, cwd: str) -> None:
        self.found.runners.add("unittest")
        names = [a for a in args if not a.startswith("-")]
        if not names or names[0] == "discover":
            self.unittest_discover(args[1:] if names else args, cwd=cwd)
            return
        for name in names:
            if name.endswith(".py") or "/" in name:
                path = _join(cwd, name)
                if path is not None and self.exists(path):
                    self.found.named.add(path)
                    self._inits(posixpath.dirname(path))
            else:
                self.module(name, cwd=cwd)

    def unittest_discover(self, args: list[str], *, cwd: str) -> None:
        start, pattern, top = ".", _UNITTEST_PATTERN, None
        positional: list[str] = []
        words = list(args)
        while words:
            word = words.pop(0)
            if word in ("-s", "--start-directory") and words:
                start = words.pop(0)
            elif word in ("-p", "--pattern") and words:
                pattern = words.pop(0)
            elif word in ("-t", "--top-level-directory") and words:
                top = words.pop(0)
            elif word.startswith("--pattern="):
                pattern = word.split("=", 1)[1]
            elif not word.startswith("-"):
                positional.append(word)
        for index, value in enumerate(positional[:3]):
            if index == 0:
                start = value
            elif index == 1:
                pattern = value
            else:
                top = value
        folder = _join(cwd, start)
        if folder is None:
            return
        if not self.is_dir(folder) and _MODULE.match(start):  # a dotted start package
            folder = _join(cwd, start.replace(".", "/")) or folder
        chosen = pattern
        self.found.collect(folder, lambda rel: fnmatch.fnmatchcase(posixpath.basename(rel), chosen))
        self.found.config.add(_in(folder, "__init__.py"))
        self.found.collect(
            folder, lambda rel: posixpath.basename(rel) == "__init__.py", config=True
        )
        if top is not None:
            top_folder = _join(cwd, top)
            if top_folder:
                self._inits(top_folder)

    def pytest(self, args: list[str], *, cwd: str) -> None:
        self.found.runners.add("pytest")
        paths: list[str] = []
        words = list(args)
        while words:
            word = words.pop(0)
            if word in ("-c", "--config-file") and words:
                config = _join(cwd, words.pop(0))
                if config is not None:
                    self.found.config.add(config)
            elif word in _PYTEST_VALUED:
                words = words[1:]
            elif word.startswith("-"):
                continue
            else:
                path = _join(cwd, word.split("::", 1)[0])
                if path is not None:
                    paths.append(path)
        for level in _ancestors(_in(cwd, "x")):
            for name in PYTEST_CONFIG:
                self.found.config.add(_in(level, name))
        files, testpaths = self.pytest_ini(cwd)
        if not paths:
            paths = [p for p in (_join(cwd, t) for t in testpaths) if p is not None] or [cwd]
        for path in paths:
            if path and (path in self.main.files or path in self.branch.files):
                self.found.named.add(path)
                self._python_config(posixpath.dirname(path))
            elif self.is_dir(path):
                self._python_config(path)
                self.found.collect(path, _file_match(files))
                self.found.collect(
                    path, lambda rel: posixpath.basename(rel) in PYTHON_CONFIG, config=True
                )
                self.found.collect(
                    path, lambda rel: posixpath.basename(rel) == "__init__.py", config=True
                )
            elif path:
                # Missing on both sides (listed as unpinned), or a holdout row's file the
                # gate places later: pytest would still read the configuration on its way.
                self.found.named.add(path)
                self._python_config(posixpath.dirname(path))

    def _python_config(self, folder: str) -> None:
        """pytest's configuration in ``folder`` and every folder above it."""
        for level in _ancestors(_in(folder, "x")):
            for name in PYTHON_CONFIG:
                self.found.config.add(_in(level, name))
            if level:
                self.found.config.add(_in(level, "__init__.py"))

    def pytest_ini(self, cwd: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(``python_files``, ``testpaths``) from the nearest pytest configuration on main."""
        levels = list(reversed(_ancestors(_in(cwd, "x"))))
        for level in levels:
            for name in PYTEST_CONFIG:
                text = self.read(_in(level, name)) if _in(level, name) in self.main.files else None
                if text is None:
                    continue
                found = _ini_values(name, text)
                if found is not None:
                    return found
        return _PYTEST_FILES, ()

    # -- make, tox, go, node ------------------------------------------------------------

    def make(self, args: list[str], *, cwd: str, depth: int) -> None:
        self.found.runners.add("make")
        folder, makefile, targets = cwd, None, []
        words = list(args)
        while words:
            word = words.pop(0)
            if word == "-C" and words:
                folder = _join(cwd, words.pop(0)) or folder
            elif word == "-f" and words:
                makefile = words.pop(0)
            elif word.startswith("-") or "=" in word:
                continue
            else:
                targets.append(word)
        names = [makefile] if makefile else list(MAKEFILES)
        paths = [p for p in (_join(folder, n) for n in names) if p is not None]
        self.found.config.update(paths)
        text = next((t for t in (self.read(p) for p in paths if p in self.main.files) if t), None)
        if text is None or depth >= _MAX_MAKE_DEPTH:
            return
        for line in _make_recipe(text, targets):
            self.commands(simple_commands(line), cwd=folder, depth=depth + 1)

    def ini_commands(self, path: str, section: str, *, cwd: str, depth: int) -> None:
        text = self.read(path) if path in self.main.files else None
        if not text:
            return
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            parser.read_string(text)
        except configparser.Error:
            return
        if parser.has_option(section, "commands"):
            for line in parser.get(section, "commands").splitlines():
                if line.strip() and depth < _MAX_MAKE_DEPTH:
                    line = line.replace("{posargs}", "")
                    self.commands(simple_commands(line), cwd=cwd, depth=depth + 1)

    def go(self, args: list[str], *, cwd: str) -> None:
        self.found.runners.add("go")
        packages, chdir = _go_packages(args)
        if chdir:  # go test -C DIR: everything is relative to DIR
            cwd = _join(cwd, chdir) or cwd
        self.found.config.add(_in(cwd, "go.mod"))
        for level in _ancestors(_in(cwd, "x")):  # a go.work above selects the modules
            self.found.config.add(_in(level, "go.work"))
        packages = packages or ["."]
        for package in packages:
            recursive = package.endswith("/...")
            folder = _join(cwd, package[: -len("/...")] if recursive else package)
            if folder is None:
                continue

            def match(rel: str, recursive: bool = recursive) -> bool:
                if not recursive and "/" in rel and not rel.startswith("testdata/"):
                    return False
                return rel.endswith("_test.go") or "testdata/" in f"/{rel}"

            self.found.collect(folder, match)

    def node(self, program: str, args: list[str], *, cwd: str) -> None:
        runs_tests = (
            program in ("jest", "vitest")
            or (program in ("npx", "bun") and args[:1] and args[0] in ("jest", "vitest", "test"))
            or (program == "node" and "--test" in args)
            or (program in ("npm", "yarn", "pnpm") and args[:1] in (["test"], ["t"]))
            or (program in ("npm", "yarn", "pnpm") and args[:2] == ["run", "test"])
        )
        if not runs_tests:
            self.words(args, cwd=cwd)
            return
        self.found.runners.add("node")
        if program == "node":
            self.found.runners.add("node:test")  # node's own runner: its report is read
        for level in _ancestors(_in(cwd, "x")):
            self.found.config.add(_in(level, "package.json"))
            for name in NODE_CONFIG:
                self.found.config.add(_in(level, name))
        self.found.collect(
            cwd,
            lambda rel: bool(_NODE_TEST.search(rel)) or "__tests__/" in f"/{rel}",
        )


def _go_packages(args: list[str]) -> tuple[list[str], str]:
    """The package patterns of ``go test ARGS`` and the folder ``-C`` names ("" for none):
    not the values of its flags (``-run TestAdd``), nor what follows ``-args`` (the test
    binary's own arguments)."""
    packages: list[str] = []
    chdir = ""
    words = iter(args)
    for word in words:
        if word in ("-args", "--args"):
            break
        if word.startswith("-"):
            name, eq, value = word.lstrip("-").partition("=")
            if not eq and name in _GO_VALUE_FLAGS:
                value = next(words, "")
            if name == "C":
                chdir = value
            continue
        packages.append(word)
    return packages, chdir


def _file_match(patterns: Collection[str]) -> Callable[[str], bool]:
    def match(rel: str) -> bool:
        name = posixpath.basename(rel)
        return any(fnmatch.fnmatchcase(name, p) for p in patterns)

    return match


def _ini_values(name: str, text: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(python_files, testpaths) when ``text`` is a pytest configuration, else None."""
    values: dict[str, object] = {}
    if name == "pyproject.toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            return None
        options = data.get("tool", {}).get("pytest", {}).get("ini_options")
        if not isinstance(options, dict):
            return None
        values = options
    else:
        section = {"setup.cfg": "tool:pytest", "tox.ini": "pytest"}.get(name, "pytest")
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            parser.read_string(text)
        except configparser.Error:
            return None
        if not parser.has_section(section):
            return None
        values = dict(parser.items(section))

    def listed(key: str) -> tuple[str, ...]:
        value = values.get(key)
        if isinstance(value, list):
            return tuple(str(v) for v in value)
        if isinstance(value, str):
            return tuple(value.split())
        return ()

    return listed("python_files") or _PYTEST_FILES, listed("testpaths")


def _make_recipe(text: str, targets: list[str]) -> list[str]:
    """The recipe lines ``targets`` (default: the first) run, prerequisites first, with the
    makefile's simple variables expanded."""
    variables: dict[str, str] = {}
    rules: dict[str, tuple[list[str], list[str]]] = {}
    order: list[str] = []
    current: list[str] | None = None
    for raw in text.splitlines():
        if raw.startswith("\t"):
            if current is not None:
                current.append(raw[1:])
            continue
        line = raw.split("#", 1)[0].rstrip()
        if not line:
            continue
        assign = _MAKE_ASSIGN.match(line)
        if assign and ":" not in line.split("=", 1)[0].rstrip(":?+"):
            variables[assign.group(1)] = assign.group(2).strip()
            current = None
            continue
        rule = _MAKE_RULE.match(line)
        if rule is None:
            current = None
            continue
        recipe: list[str] = []
        current = recipe
        for target in rule.group(1).split():
            rules[target] = (rule.group(2).split(";")[0].split(), recipe)
            if not target.startswith("."):
                order.append(target)

    def expand(line: str) -> str:
        for _ in range(4):
            line = _MAKE_VAR.sub(lambda m: variables.get(m.group(1), ""), line)
        return line.lstrip("@-+ ")

    lines: list[str] = []
    seen: set[str] = set()

    def visit(target: str) -> None:
        if target in seen or target not in rules:
            return
        seen.add(target)
        prerequisites, recipe = rules[target]
        for prerequisite in prerequisites:
            visit(expand(prerequisite))
        lines.extend(expand(line) for line in recipe)

    for target in targets or order[:1]:
        visit(target)
    return lines


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
