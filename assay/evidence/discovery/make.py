"""``make [-C DIR] [-f FILE] [TARGET]``: the makefile, and what the target's recipe runs.

The makefile is main's (it is pinned), with the files it ``include``s (``include``,
``-include``, ``sinclude``: pinned too, and read as part of it), and the commands of the
target's recipe, prerequisites first, with the makefile's simple variables expanded, are
discovered in turn.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from assay.evidence.discovery.python import MAX_DEPTH
from assay.evidence.discovery.tree import join, simple_commands

if TYPE_CHECKING:
    from assay.evidence.discovery.core import Discovery

MAKEFILES = ("GNUmakefile", "makefile", "Makefile")
_ASSIGN = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*[:?+]?=\s*(.*)$")
_RULE = re.compile(r"^([^\s:=#][^:=#]*?)\s*::?(?!=)\s*(.*)$")
_VAR = re.compile(r"\$[({]([A-Za-z_][A-Za-z0-9_]*)[)}]")
_INCLUDE = re.compile(r"^\s*(?:-include|sinclude|include)\s+(.+)$")
_MAX_INCLUDES = 32


def make(d: Discovery, args: list[str], *, cwd: str, depth: int) -> None:
    d.found.runners.add("make")
    folder, makefile, targets = cwd, None, []
    words = list(args)
    while words:
        word = words.pop(0)
        if word == "-C" and words:
            folder = join(cwd, words.pop(0)) or folder
        elif word == "-f" and words:
            makefile = words.pop(0)
        elif word.startswith("-") or "=" in word:
            continue
        else:
            targets.append(word)
    names = [makefile] if makefile else list(MAKEFILES)
    paths = [p for p in (join(folder, n) for n in names) if p is not None]
    d.found.config.update(paths)
    path = next((p for p in paths if d.read(p) is not None), None)
    if path is None or depth >= MAX_DEPTH:
        return
    text = _with_includes(d, path, folder)
    for line in recipe(text, targets):
        d.commands(simple_commands(line), cwd=folder, depth=depth + 1)


def _with_includes(d: Discovery, path: str, folder: str) -> str:
    """The makefile's text with each file it includes (main's) put in place of the line
    that includes it; every included path is pinned, found or not (a ``-include`` of a
    file main lacks must not be the branch's to add)."""
    seen: set[str] = set()

    def expand(path: str, budget: list[int]) -> str:
        if path in seen or budget[0] <= 0:
            return ""
        seen.add(path)
        budget[0] -= 1
        lines = []
        for raw in (d.read(path) or "").splitlines():
            found = _INCLUDE.match(raw) if not raw.startswith("\t") else None
            if found is None:
                lines.append(raw)
                continue
            for name in found.group(1).split("#", 1)[0].split():
                included = join(folder, name)  # make resolves them from where it runs
                if included is None or "$" in name or "*" in name:
                    continue
                d.found.config.add(included)
                lines.append(expand(included, budget))
        return "\n".join(lines)

    return expand(path, [_MAX_INCLUDES])


def recipe(text: str, targets: list[str]) -> list[str]:
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
        assign = _ASSIGN.match(line)
        if assign and ":" not in line.split("=", 1)[0].rstrip(":?+"):
            variables[assign.group(1)] = assign.group(2).strip()
            current = None
            continue
        rule = _RULE.match(line)
        if rule is None:
            current = None
            continue
        lines: list[str] = []
        current = lines
        for target in rule.group(1).split():
            rules[target] = (rule.group(2).split(";")[0].split(), lines)
            if not target.startswith("."):
                order.append(target)

    def expand(line: str) -> str:
        for _ in range(4):
            line = _VAR.sub(lambda m: variables.get(m.group(1), ""), line)
        return line.lstrip("@-+ ")

    found: list[str] = []
    seen: set[str] = set()

    def visit(target: str) -> None:
        if target in seen or target not in rules:
            return
        seen.add(target)
        prerequisites, lines = rules[target]
        for prerequisite in prerequisites:
            visit(expand(prerequisite))
        found.extend(expand(line) for line in lines)

    for target in targets or order[:1]:
        visit(target)
    return found
