"""Acceptance files pinned to main, and Python that the work tree cannot shadow.

A desk must not pass its rows by changing what they run. Before the gate runs a brief's
rows in the clean tree of the review's head, it restores from main *at the brief's base*
(the merge base of the head and main):

- every path a row names that main has (a file, or a whole directory, extra files removed);
  a dotted module (``python -m unittest tests.test_x``) names ``tests/test_x.py`` and the
  ``__init__.py`` of each package on the way;
- the test configuration those rows read: ``conftest.py`` in the tree's root and in every
  directory on the way to a named path, and ``pytest.ini``, ``pyproject.toml``,
  ``setup.cfg``, ``tox.ini`` at the root;
- the brief's own ``protect:`` globs.

A pinned path main does not have is removed from the tree (a branch's own ``conftest.py``
that skips everything does not survive), except a named file missing on main, which is the
branch's own work and is reported as such. ``protect: []`` pins nothing.

Python in every row runs with ``PYTHONSAFEPATH=1``: neither the working directory nor the
script's directory is put *before* the standard library, so a branch ``unittest.py`` cannot
stand in for the real one. A tiny ``sitecustomize`` appends them *after* it instead, so the
project's own modules still import.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from assay.forge import Forge

CONFTEST = "conftest.py"
ROOT_CONFIG = ("pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini")
SAFE_PATH_ENV = "PYTHONSAFEPATH"
_DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")
_SITE = """\
# Written by the Assay gate: the row's tree goes after the standard library, never before.
import os
import sys

_here = os.getcwd()
_script = os.path.dirname(os.path.abspath(sys.argv[0])) if sys.argv and sys.argv[0] else ""
for _entry in (_script, _here):
    if _entry and os.path.isdir(_entry) and _entry not in sys.path:
        sys.path.append(_entry)
"""


@dataclass(frozen=True)
class PinPlan:
    """What to restore from ``base`` and what to remove before the rows run."""

    base: str
    restore: tuple[str, ...] = ()  # files main has, copied over the branch's
    remove: tuple[str, ...] = ()  # files the branch added where main has none
    unpinned: tuple[str, ...] = ()  # files a row names that main does not have (the branch's)

    @property
    def pinned(self) -> list[str]:
        """Every path the rows see as main has it (restored or removed), sorted."""
        return sorted({*self.restore, *self.remove})


@dataclass
class _Listing:
    files: dict[str, str] = field(default_factory=dict)  # path -> mode

    def has_dir(self, path: str) -> bool:
        prefix = path.rstrip("/") + "/"
        return any(name.startswith(prefix) for name in self.files)

    def under(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return [name for name in self.files if name.startswith(prefix)]


def _listing(forge: Forge, commit: str) -> _Listing:
    listing = _Listing()
    for mode, kind, name in forge.tree_entries(commit):
        if kind == "blob":
            listing.files[name] = mode
    return listing


def brief_base(forge: Forge, head: str, main: str | None) -> str | None:
    """The commit of main the branch started from (their merge base), else main itself."""
    if main is None:
        return None
    return forge.merge_base(head, main) or main


def _tokens(command: str) -> list[str]:
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        words = command.split()
    tokens: list[str] = []
    after_cd = False
    for word in words:
        if after_cd:  # `cd DIR` moves the row; DIR is where the code is, not a test
            after_cd = False
            continue
        if word == "cd":
            after_cd = True
            continue
        value = word.split("=", 1)[1] if word.startswith("-") and "=" in word else word
        value = value.split("::", 1)[0]  # a pytest node id names its file
        while value.startswith("./"):
            value = value[2:]
        if value and not value.startswith(("-", "/")) and ".." not in PurePosixPath(value).parts:
            tokens.append(value.rstrip("/"))
    return tokens


def _named(command: str, main: _Listing) -> tuple[set[str], set[str], set[str]]:
    """(files to pin, directories to pin whole, named files main lacks) for one row."""
    files: set[str] = set()
    dirs: set[str] = set()
    missing: set[str] = set()
    for token in _tokens(command):
        candidates = [token]
        if _DOTTED.match(token):
            parts = token.split(".")
            candidates = [f"{'/'.join(parts)}.py", "/".join(parts)]
            for depth in range(1, len(parts)):
                files.add("/".join(parts[:depth]) + "/__init__.py")
        for candidate in candidates:
            if candidate in main.files:
                files.add(candidate)
            elif main.has_dir(candidate):
                dirs.add(candidate)
            elif "." in PurePosixPath(candidate).name and candidate == candidates[0]:
                missing.add(candidate)
    return files, dirs, missing


def _conftests(paths: Iterable[str]) -> set[str]:
    found = {CONFTEST}
    for path in paths:
        parents = PurePosixPath(path).parents
        for parent in parents:
            if str(parent) != ".":
                found.add(f"{parent}/{CONFTEST}")
        found.add(f"{path}/{CONFTEST}")
    return found


def plan_pins(
    main: _Listing,
    tree: _Listing,
    *,
    base: str,
    commands: Sequence[str],
    protect: Sequence[str] | None,
) -> PinPlan:
    """The pure part: which paths the rows see from main, given both listings."""
    if protect is not None and not protect:
        return PinPlan(base=base)
    files: set[str] = set()
    dirs: set[str] = set()
    missing: set[str] = set()
    for command in commands:
        more_files, more_dirs, more_missing = _named(command, main)
        files |= more_files
        dirs |= more_dirs
        missing |= more_missing
    config = _conftests([*files, *dirs, *missing]) | set(ROOT_CONFIG)
    restore = {p for p in files | config if p in main.files}
    remove = {p for p in config if p not in main.files and p in tree.files}
    remove |= {p for p in files if p not in main.files and p in tree.files and p.endswith(".py")}
    for directory in dirs:
        restore |= set(main.under(directory))
        remove |= {p for p in tree.under(directory) if p not in main.files}
    for pattern in protect or ():
        restore |= {p for p in main.files if fnmatch.fnmatchcase(p, pattern)}
        remove |= {p for p in tree.files if fnmatch.fnmatchcase(p, pattern) and p not in main.files}
    return PinPlan(
        base=base,
        restore=tuple(sorted(restore)),
        remove=tuple(sorted(remove)),
        unpinned=tuple(sorted(missing - restore)),
    )


def plan_for(
    forge: Forge,
    *,
    head: str,
    main: str | None,
    commands: Sequence[str],
    protect: Sequence[str] | None,
) -> PinPlan | None:
    """The pin plan for ``head`` against main at the brief's base (None without a main)."""
    base = brief_base(forge, head, main)
    if base is None:
        return None
    return plan_pins(
        _listing(forge, base),
        _listing(forge, head),
        base=base,
        commands=commands,
        protect=protect,
    )


def _clear_way(tree: Path, relative: str) -> Path:
    """``tree/relative`` with every parent a real directory (a branch symlink is removed)."""
    target = tree
    for part in PurePosixPath(relative).parts[:-1]:
        target = target / part
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            target.unlink()
        target.mkdir(exist_ok=True)
    final = target / PurePosixPath(relative).name
    if final.is_symlink() or final.is_file():
        final.unlink()
    elif final.is_dir():
        shutil.rmtree(final)
    return final


def apply_pins(forge: Forge, tree: Path, plan: PinPlan) -> None:
    """Write main's bytes (and modes) of ``plan.restore`` and delete ``plan.remove``."""
    listing = _listing(forge, plan.base) if plan.restore else _Listing()
    blobs = forge.read_blobs([(plan.base, path) for path in plan.restore])
    for path, data in zip(plan.restore, blobs, strict=True):
        if data is None:
            continue
        final = _clear_way(tree, path)
        mode = listing.files.get(path, "100644")
        if mode == "120000":
            final.symlink_to(data.decode("utf-8", "surrogateescape"))
            continue
        final.write_bytes(data)
        final.chmod(0o755 if mode == "100755" else 0o644)
    for path in plan.remove:
        _clear_way(tree, path)


def safe_python_env(env: Mapping[str, str], site_dir: Path) -> dict[str, str]:
    """``env`` for rows: Python never puts the work tree before its standard library."""
    site_dir.mkdir(parents=True, exist_ok=True)
    (site_dir / "sitecustomize.py").write_text(_SITE)
    safe = dict(env)
    safe[SAFE_PATH_ENV] = "1"
    safe["PYTHONPATH"] = str(site_dir)  # the gate's own file only (rows never set it)
    safe.pop("PYTHONHOME", None)
    safe.pop("PYTHONUSERBASE", None)
    safe["PYTHONNOUSERSITE"] = "1"
    return safe


def describe(plan: PinPlan | None) -> str:
    """One line for the review: which files were pinned from main, at which commit."""
    if plan is None or not plan.pinned:
        return "Pinned from main: nothing (the brief's protect: [] or no main)."
    shown = ", ".join(f"`{p}`" for p in plan.pinned[:20])
    more = f" and {len(plan.pinned) - 20} more" if len(plan.pinned) > 20 else ""
    return f"Pinned from main at `{plan.base[:12]}`: {shown}{more}."
