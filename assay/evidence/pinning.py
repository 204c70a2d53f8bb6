"""The acceptance set pinned to main, and Python that the work tree cannot shadow.

A desk must not pass its rows by changing what they run. Before the gate runs a brief's
rows in the clean tree of the review's head, it restores from main *at the brief's base*
(the merge base of the head and main) the rows' acceptance set, as
``assay.evidence.discovery`` finds it by each runner's own rules: the files a runner would
collect, its configuration at every folder level, the paths a row names, and the brief's
``protect:`` globs. A file of the set main has gets main's bytes; one only the branch has is
removed, except a path a row names literally, which is the branch's own work and reported
as ``unpinned``. ``apply_pins`` names every file the desk had changed there, for the review.
``protect: []`` pins nothing (the desk writes its own tests, and the review says so).

Python in every row runs with ``PYTHONSAFEPATH=1``: neither the working directory nor the
script's directory is put *before* the standard library, so a branch ``unittest.py`` cannot
stand in for the real one. A tiny ``sitecustomize`` appends them *after* it instead, so the
project's own modules still import; it also starts the gate's unittest reporter
(``assay.evidence.reporters``) in a ``python -m unittest`` process the gate reads.
"""

from __future__ import annotations

import fnmatch
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from assay.evidence.discovery import Tree, discover, row_runners
from assay.evidence.reporters import install as install_reporters
from assay.forge import Forge

SAFE_PATH_ENV = "PYTHONSAFEPATH"
_SITE = """\
# Written by the Assay gate: the row's tree goes after the standard library, never before.
import os
import sys

_here = os.getcwd()
_script = os.path.dirname(os.path.abspath(sys.argv[0])) if sys.argv and sys.argv[0] else ""
for _entry in (_script, _here):
    if _entry and os.path.isdir(_entry) and _entry not in sys.path:
        sys.path.append(_entry)


def _module():
    # The module `python -m` runs, if this process is one (read before any code of the row).
    words = list(getattr(sys, "orig_argv", [])[1:])
    while words:
        word = words.pop(0)
        if word == "-m":
            return words[0] if words else None
        if word in ("-W", "-X", "-Q"):
            words = words[1:]
        elif not word.startswith("-") or word == "-c":
            return None
    return None


if os.environ.get("ASSAY_GATE_REPORT") and _module() == "unittest":
    import assay_gate_unittest

    assay_gate_unittest.install()
"""


@dataclass(frozen=True)
class PinPlan:
    """What to restore from ``base`` and what to remove before the rows run."""

    base: str
    restore: tuple[str, ...] = ()  # files main has, copied over the branch's
    remove: tuple[str, ...] = ()  # files the branch added where main has none
    unpinned: tuple[str, ...] = ()  # files a row names that main does not have (the branch's)
    runners: tuple[str, ...] = ()  # the runners the rows start ("pytest", "unittest", ...)
    protect_nothing: bool = False  # the brief's ``protect: []``: the desk writes its own tests
    # (row command, the runners it starts, whether main has any test it runs)
    row_runners: tuple[tuple[str, tuple[str, ...], bool], ...] = ()
    restore_modes: tuple[str, ...] = ()  # each restored file's git mode, when known

    def runners_of(self, command: str) -> tuple[str, ...]:
        """The runners ``command`` starts, as discovery found them."""
        return next((r for c, r, _ in self.row_runners if c == command), ())

    def main_has_tests(self, command: str) -> bool:
        """Whether main at the base has any test ``command`` would run."""
        return next((t for c, _, t in self.row_runners if c == command), True)

    @property
    def pinned(self) -> list[str]:
        """Every path the rows see as main has it (restored or removed), sorted."""
        return sorted({*self.restore, *self.remove})


def _modes(forge: Forge, commit: str) -> dict[str, str]:
    """Each file of ``commit``'s tree, with its git mode."""
    return {name: mode for mode, kind, name in forge.tree_entries(commit) if kind == "blob"}


def brief_base(forge: Forge, head: str, main: str | None) -> str | None:
    """The commit of main the branch started from (their merge base), else main itself."""
    if main is None:
        return None
    return forge.merge_base(head, main) or main


def plan_pins(
    main: Tree,
    tree: Tree,
    *,
    base: str,
    commands: Sequence[str],
    protect: Sequence[str] | None,
    read: Callable[[str], str | None] = lambda _path: None,
    modes: Mapping[str, str] | None = None,
) -> PinPlan:
    """The pure part: which paths the rows see from main, given both listings (``read``
    gives main's text of a configuration file: a makefile's recipe, ``testpaths``;
    ``modes`` main's git modes, kept so each row's tree is pinned without listing main
    again)."""
    per_row = tuple(
        (command, *row_runners(command, main=main, branch=tree, read=read)) for command in commands
    )
    if protect is not None and not protect:
        return PinPlan(base=base, protect_nothing=True, row_runners=per_row)
    found = discover(commands, main=main, branch=tree, read=read)
    wanted = found.named | found.config | found.collected
    restore = {p for p in wanted if p in main.files}
    remove = {p for p in (found.config | found.collected) - main.files if p in tree.files}
    for directory in found.dirs:
        restore |= set(main.under(directory))
        remove |= {p for p in tree.under(directory) if p not in main.files}
    for pattern in protect or ():
        restore |= {p for p in main.files if fnmatch.fnmatchcase(p, pattern)}
        remove |= {p for p in tree.files if fnmatch.fnmatchcase(p, pattern) and p not in main.files}
    restored = tuple(sorted(restore))
    return PinPlan(
        base=base,
        restore=restored,
        restore_modes=tuple(modes.get(p, "100644") for p in restored) if modes else (),
        remove=tuple(sorted(remove)),
        unpinned=tuple(sorted(found.named - restore - remove)),
        runners=tuple(sorted(found.runners)),
        row_runners=per_row,
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
    modes = _modes(forge, base)
    main_tree = Tree(modes)

    def read(path: str) -> str | None:
        if path not in main_tree.files:
            return None
        data = forge.read_blobs([(base, path)])[0]
        return None if data is None else data.decode("utf-8", "replace")

    return plan_pins(
        main_tree,
        Tree(_modes(forge, head)),
        base=base,
        commands=commands,
        protect=protect,
        read=read,
        modes=modes,
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


def apply_pins(forge: Forge, tree: Path, plan: PinPlan) -> list[str]:
    """Write main's bytes (and modes) of ``plan.restore`` and delete ``plan.remove``; one
    line per file the branch had changed there, for the review."""
    if plan.restore_modes:
        modes = dict(zip(plan.restore, plan.restore_modes, strict=True))
    else:
        modes = _modes(forge, plan.base) if plan.restore else {}
    blobs = forge.read_blobs([(plan.base, path) for path in plan.restore])
    changed: list[str] = []
    for path, data in zip(plan.restore, blobs, strict=True):
        if data is None:
            continue
        mode = modes.get(path, "100644")
        was = _present(tree / path)
        if was is None:
            changed.append(f"{path}: deleted by the desk; main's version ran")
        elif was != (mode, data):
            changed.append(f"{path}: edited by the desk; main's version ran")
        final = _clear_way(tree, path)
        if mode == "120000":
            final.symlink_to(data.decode("utf-8", "surrogateescape"))
            continue
        final.write_bytes(data)
        final.chmod(0o755 if mode == "100755" else 0o644)
    for path in plan.remove:
        if _present(tree / path) is not None:
            changed.append(f"{path}: added by the desk; removed before the rows ran")
        _clear_way(tree, path)
    return sorted(changed)


def _present(path: Path) -> tuple[str, bytes] | None:
    """(git mode, bytes) of a checked-out file, None when there is none."""
    if path.is_symlink():
        return "120000", str(path.readlink()).encode("utf-8", "surrogateescape")
    if not path.is_file():
        return None
    return ("100755" if path.stat().st_mode & 0o100 else "100644"), path.read_bytes()


def safe_python_env(env: Mapping[str, str], site_dir: Path) -> dict[str, str]:
    """``env`` for rows: Python never puts the work tree before its standard library."""
    site_dir.mkdir(parents=True, exist_ok=True)
    (site_dir / "sitecustomize.py").write_text(_SITE)
    install_reporters(site_dir)
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
