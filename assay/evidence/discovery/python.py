"""Python's runners: pytest, unittest, ``python -m``, tox and nox.

- **pytest** (``pytest``, ``py.test``, ``python -m pytest``): the named files and folders,
  else the ini file's ``testpaths``, else the working folder; ``test_*.py`` and ``*_test.py``
  (or the ini file's ``python_files``) under them; ``conftest.py`` and ``__init__.py`` in
  every folder on the way; ``pytest.ini``, ``.pytest.ini``, ``tox.ini``, ``setup.cfg``,
  ``pyproject.toml`` in every folder from the root down (pytest reads the nearest first);
- **unittest** (``python -m unittest``): bare (``test_calc``) and dotted (``tests.test_x``)
  module names, file paths, ``discover`` with its ``-s``/``-p``/``-t`` (default ``test*.py``
  from the working folder), and each package's ``__init__.py`` (``load_tests``);
- **tox** and **nox**: ``tox.ini`` (and its ``commands``, discovered in turn) /
  ``noxfile.py``, and the pytest rules.
"""

from __future__ import annotations

import configparser
import fnmatch
import posixpath
import re
import tomllib
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from assay.evidence.discovery.tree import ancestors, inside, join, simple_commands

if TYPE_CHECKING:
    from assay.evidence.discovery.core import Discovery

PYTEST_CONFIG = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
PYTHON_CONFIG = (*PYTEST_CONFIG, "conftest.py", "noxfile.py")
_PYTEST_FILES = ("test_*.py", "*_test.py")
_UNITTEST_PATTERN = "test*.py"
PYTHON_PROGRAM = re.compile(r"^python(\d+(\.\d+)?)?$")
MODULE_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
# pytest options that take a value as the next word (so that word is not a test path).
_PYTEST_VALUED = frozenset(
    {
        "-k", "-m", "-p", "-o", "-W", "-n", "-r", "--maxfail", "--tb", "--rootdir",
        "--deselect", "--junitxml", "--junit-xml", "--confcutdir", "--basetemp", "--durations",
        "--log-level", "--import-mode", "--override-ini", "--cov", "--dist",
    }
)  # fmt: skip
_PYTHON_VALUED = frozenset({"-W", "-X", "-Q"})
MAX_DEPTH = 8  # how deep one row's commands may lead (a make recipe, a tox command, a script)


def python(d: Discovery, argv: list[str], *, cwd: str, depth: int) -> None:
    """``python [OPTIONS] (-m MODULE | SCRIPT) ARGS``."""
    args = argv[1:]
    while args:
        word = args.pop(0)
        if word == "-m" and args:
            module_name, rest = args[0], args[1:]
            if module_name in ("pytest", "py.test"):
                pytest(d, rest, cwd=cwd)
            elif module_name == "unittest":
                unittest(d, rest, cwd=cwd)
            elif module_name == "tox":
                d.command(["tox", *rest], cwd=cwd, depth=depth)
            else:
                module(d, module_name, cwd=cwd)
                d.words(rest, cwd=cwd)
            return
        if word == "-c":
            return
        if word in _PYTHON_VALUED:
            args = args[1:]
            continue
        if word.startswith("-"):
            continue
        d.words([word, *args], cwd=cwd)
        return


def module(d: Discovery, name: str, *, cwd: str) -> bool:
    """A module name (``test_calc``, ``tests.test_x.T.test_add``) as files; whether one was
    found. Each package's ``__init__.py`` comes with it."""
    if not MODULE_NAME.match(name):
        return False
    parts = name.split(".")
    for depth in range(len(parts), 0, -1):
        stem = join(cwd, "/".join(parts[:depth]))
        if stem is None:
            return False
        if d.exists(stem + ".py"):
            d.found.named.add(stem + ".py")
        elif d.is_dir(stem) and d.exists(stem + "/__init__.py"):
            d.found.dirs.add(stem)
        else:
            continue
        for up in range(1, depth):
            init = join(cwd, "/".join(parts[:up]) + "/__init__.py")
            if init is not None:
                d.found.config.add(init)
        return True
    return False


def _inits(d: Discovery, folder: str) -> None:
    """``__init__.py`` (its ``load_tests``) in ``folder`` and every folder above it."""
    for parent in ancestors(inside(folder, "x")):
        if parent:
            d.found.config.add(inside(parent, "__init__.py"))


def unittest(d: Discovery, args: list[str], *, cwd: str) -> None:
    d.found.runners.add("unittest")
    names = [a for a in args if not a.startswith("-")]
    if not names or names[0] == "discover":
        _unittest_discover(d, args[1:] if names else args, cwd=cwd)
        return
    for name in names:
        if name.endswith(".py") or "/" in name:
            path = join(cwd, name)
            if path is not None and d.exists(path):
                d.found.named.add(path)
                _inits(d, posixpath.dirname(path))
        else:
            module(d, name, cwd=cwd)


def _unittest_discover(d: Discovery, args: list[str], *, cwd: str) -> None:
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
    folder = join(cwd, start)
    if folder is None:
        return
    if not d.is_dir(folder) and MODULE_NAME.match(start):  # a dotted start package
        folder = join(cwd, start.replace(".", "/")) or folder
    chosen = pattern
    d.found.collect(folder, lambda rel: fnmatch.fnmatchcase(posixpath.basename(rel), chosen))
    d.found.config.add(inside(folder, "__init__.py"))
    d.found.collect(folder, lambda rel: posixpath.basename(rel) == "__init__.py", config=True)
    if top is not None:
        top_folder = join(cwd, top)
        if top_folder:
            _inits(d, top_folder)


def pytest(d: Discovery, args: list[str], *, cwd: str) -> None:
    d.found.runners.add("pytest")
    paths: list[str] = []
    words = list(args)
    while words:
        word = words.pop(0)
        if word in ("-c", "--config-file") and words:
            config = join(cwd, words.pop(0))
            if config is not None:
                d.found.config.add(config)
        elif word in _PYTEST_VALUED:
            words = words[1:]
        elif word.startswith("-"):
            continue
        else:
            path = join(cwd, word.split("::", 1)[0])
            if path is not None:
                paths.append(path)
    for level in ancestors(inside(cwd, "x")):
        for name in PYTEST_CONFIG:
            d.found.config.add(inside(level, name))
    files, testpaths = _pytest_ini(d, cwd)
    if not paths:
        paths = [p for p in (join(cwd, t) for t in testpaths) if p is not None] or [cwd]
    for path in paths:
        if path and d.exists(path):
            d.found.named.add(path)
            _python_config(d, posixpath.dirname(path))
        elif d.is_dir(path):
            _python_config(d, path)
            d.found.collect(path, _file_match(files))
            d.found.collect(path, lambda rel: posixpath.basename(rel) in PYTHON_CONFIG, config=True)
            d.found.collect(path, lambda rel: posixpath.basename(rel) == "__init__.py", config=True)
        elif path:
            # Missing on both sides (listed as unpinned), or a holdout row's file the
            # gate places later: pytest would still read the configuration on its way.
            d.found.named.add(path)
            _python_config(d, posixpath.dirname(path))


def tox(d: Discovery, *, cwd: str, depth: int) -> None:
    """``tox``: its ``tox.ini``, the commands of its ``testenv`` (main's), and pytest."""
    path = inside(cwd, "tox.ini")
    d.found.config.add(path)
    text = d.read(path)
    if text:
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            parser.read_string(text)
        except configparser.Error:
            parser = configparser.ConfigParser()
        if parser.has_option("testenv", "commands") and depth < MAX_DEPTH:
            for line in parser.get("testenv", "commands").splitlines():
                if line.strip():
                    line = line.replace("{posargs}", "")
                    d.commands(simple_commands(line), cwd=cwd, depth=depth + 1)
    pytest(d, [], cwd=cwd)


def nox(d: Discovery, *, cwd: str) -> None:
    d.found.config.add(inside(cwd, "noxfile.py"))
    pytest(d, [], cwd=cwd)


def _python_config(d: Discovery, folder: str) -> None:
    """pytest's configuration in ``folder`` and every folder above it."""
    for level in ancestors(inside(folder, "x")):
        for name in PYTHON_CONFIG:
            d.found.config.add(inside(level, name))
        if level:
            d.found.config.add(inside(level, "__init__.py"))


def _pytest_ini(d: Discovery, cwd: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(``python_files``, ``testpaths``) from the nearest pytest configuration on main."""
    for level in reversed(ancestors(inside(cwd, "x"))):
        for name in PYTEST_CONFIG:
            text = d.read(inside(level, name))
            if text is None:
                continue
            found = _ini_values(name, text)
            if found is not None:
                return found
    return _PYTEST_FILES, ()


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
