"""Loading every brief of a tree: duplicates, unknown dependencies and cycles are refused.

A tree is a mapping of repository paths to file bytes (what a forge's ``briefs/`` folder on
main holds), so the same code loads briefs from a directory, a git tree or a test dict.
Files named ``README.md``, and files starting with ``.`` or ``_``, are not briefs.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from pathlib import Path, PurePosixPath

from assay.briefs.format import Brief, parse_brief
from assay.errors import BadInput


def is_brief_path(path: str) -> bool:
    """Whether a repository path names a brief file (``*.md`` but not a README)."""
    name = PurePosixPath(path).name
    return name.endswith(".md") and name.lower() != "readme.md" and not name.startswith((".", "_"))


def _parse_file(path: str, data: bytes) -> Brief:
    """One brief file, or ``BadInput`` naming ``path`` (not UTF-8, or a bad brief)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path}: not UTF-8 text ({exc.reason})", source=path) from None
    return parse_brief(text, source=path)


def load_briefs(files: Mapping[str, bytes], *, known_ids: Collection[str] = ()) -> dict[str, Brief]:
    """Parse every brief file in ``files`` (path -> bytes) and check them as a set.

    ``known_ids`` are briefs that exist elsewhere (another source) and may be depended on.
    Returns briefs by id, in path order.
    """
    briefs: dict[str, Brief] = {}
    for path in sorted(files):
        if not is_brief_path(path):
            continue
        brief = _parse_file(path, files[path])
        if brief.id in briefs:
            raise BadInput(
                f"{path} line {brief.line_of('id')}: id: {brief.id!r} is also the id of "
                f"{briefs[brief.id].source}",
                source=path,
            )
        briefs[brief.id] = brief
    check_dependencies(briefs.values(), known_ids=known_ids)
    return briefs


def split_briefs(files: Mapping[str, bytes]) -> tuple[dict[str, Brief], dict[str, BadInput]]:
    """Every brief file in ``files`` that parses, and the reason for each one that does not.

    For readers that list many briefs: one malformed file is reported for itself and
    does not hide the others (``load_briefs`` is the all-or-nothing check).
    """
    briefs: dict[str, Brief] = {}
    bad: dict[str, BadInput] = {}
    for path in sorted(files):
        if not is_brief_path(path):
            continue
        try:
            brief = _parse_file(path, files[path])
        except BadInput as error:
            bad[path] = error
            continue
        if brief.id in briefs:
            bad[path] = BadInput(
                f"{path}: id {brief.id!r} is also the id of {briefs[brief.id].source}",
                source=path,
            )
            continue
        briefs[brief.id] = brief
    return briefs, bad


def read_brief_dir(directory: Path) -> dict[str, bytes]:
    """The bytes of each brief file directly inside ``directory``."""
    if not directory.is_dir():
        raise BadInput(f"{directory}: no such briefs directory", source=str(directory))
    return {
        str(directory / entry.name): entry.read_bytes()
        for entry in sorted(directory.iterdir())
        if entry.is_file() and is_brief_path(entry.name)
    }


def load_brief_dir(directory: Path, *, known_ids: Collection[str] = ()) -> dict[str, Brief]:
    """Load the brief files directly inside ``directory`` (not its subfolders)."""
    return load_briefs(read_brief_dir(directory), known_ids=known_ids)


def check_dependencies(briefs: Iterable[Brief], *, known_ids: Collection[str] = ()) -> None:
    """Refuse dependencies on unknown briefs and dependency cycles, naming the files."""
    by_id = {brief.id: brief for brief in briefs}
    for brief in by_id.values():
        for index, dep in enumerate(brief.depends_on):
            if dep not in by_id and dep not in known_ids:
                raise BadInput(
                    f"{brief.source} line {brief.line_of(f'depends_on[{index}]')}: "
                    f"depends_on[{index}]: unknown brief {dep!r}",
                    source=brief.source,
                )
    # Iterative depth-first search; a grey node reached again closes a cycle.
    state: dict[str, int] = {}
    for root in sorted(by_id):
        if state.get(root):
            continue
        path: list[str] = [root]
        iters = [iter(by_id[root].depends_on)]
        state[root] = 1
        while iters:
            nxt = next(iters[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                iters.pop()
                continue
            if nxt not in by_id:
                continue
            if state.get(nxt) == 1:
                cycle = [*path[path.index(nxt) :], nxt]
                first = by_id[cycle[0]]
                raise BadInput(
                    f"{first.source}: depends_on: dependency cycle {' -> '.join(cycle)}",
                    source=first.source,
                    cycle=cycle,
                )
            if not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                iters.append(iter(by_id[nxt].depends_on))


def by_priority(briefs: Iterable[Brief]) -> list[Brief]:
    """Briefs in the order a desk should consider them: higher priority first, then id."""
    return sorted(briefs, key=lambda brief: (-brief.priority, brief.id))


def unmet_dependencies(brief: Brief, merged: Collection[str]) -> list[str]:
    """The dependencies of ``brief`` that are not yet merged (empty when it may start)."""
    return [dep for dep in brief.depends_on if dep not in merged]
