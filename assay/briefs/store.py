"""Briefs on a forge: read ``briefs/*.md`` from main, and file a brief on main.

Filing is a compare-and-swap push of one commit on top of the main just fetched. The new
tree is the old one with one blob added through a temporary index, so every other file
keeps its mode (executables, symlinks) and nothing else in the repository is rewritten. A
lost race re-reads main, re-validates the whole set of briefs (duplicates, dependencies,
cycles) and tries again, so two people filing at once never overwrite each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from assay.briefs.format import Brief
from assay.briefs.tree import is_brief_path, load_briefs
from assay.errors import BadInput, Busy, ForgeUnavailable
from assay.forge import MAIN, Forge, RefUpdate, open_forge
from assay.plumbing import GitError, Identity

BRIEFS_DIR = "briefs"
CAS_ATTEMPTS = 8


@dataclass(frozen=True)
class MainBriefs:
    """The briefs on main at one commit (``head`` is None when main does not exist)."""

    head: str | None
    files: dict[str, bytes]
    briefs: dict[str, Brief]


def brief_files(forge: Forge, commit: str) -> dict[str, bytes]:
    """``{"briefs/<name>.md": bytes}`` of the brief files directly in ``briefs/``."""
    paths: list[str] = []
    for mode, kind, path in forge.tree_entries(commit, f"{BRIEFS_DIR}/", recursive=False):
        if kind == "blob" and mode in ("100644", "100755") and is_brief_path(path):
            paths.append(path)
    blobs = forge.read_blobs([(commit, path) for path in paths])
    return {path: blob for path, blob in zip(paths, blobs, strict=True) if blob is not None}


def read_main_briefs(forge: Forge, *, known_ids: tuple[str, ...] = ()) -> MainBriefs:
    """Fetch main and load every brief on it (one fetch, one ``ls-tree``, one blob read)."""
    head = forge.refresh([MAIN]).get(MAIN)
    if head is None:
        return MainBriefs(head=None, files={}, briefs={})
    files = brief_files(forge, head)
    return MainBriefs(head=head, files=files, briefs=load_briefs(files, known_ids=known_ids))


def load_forge_briefs(spec: str) -> dict[str, Brief]:
    """Every brief in ``briefs/`` on the main of the forge named by ``spec``."""
    with open_forge(spec) as forge:
        return read_main_briefs(forge).briefs


def add_brief(
    spec: str | Forge,
    brief: Brief,
    data: bytes,
    *,
    author: str = "assay",
    replace: bool = False,
) -> dict[str, Any]:
    """Commit ``data`` as ``briefs/<id>.md`` on the forge's main with a CAS push.

    Returns ``{"id", "path", "commit", "unchanged", "replaced"}``. An existing brief of that
    id with other content is ``BadInput`` unless ``replace``. ``Busy`` when main kept
    moving under every attempt.
    """
    try:
        identity = Identity(name=author, email=f"{author}@assay.invalid")
    except GitError:
        raise BadInput(f"--author {author!r} must be a plain name") from None
    path = f"{BRIEFS_DIR}/{brief.id}.md"
    forge = open_forge(spec) if isinstance(spec, str) else spec
    try:
        for _ in range(CAS_ATTEMPTS):
            head = forge.refresh([MAIN]).get(MAIN)
            files = brief_files(forge, head) if head is not None else {}
            old = files.get(path)
            result = {"id": brief.id, "path": path, "replaced": old is not None}
            if old == data and head is not None:
                return {**result, "commit": head, "unchanged": True, "replaced": False}
            if old is not None and not replace:
                raise BadInput(f"{path} already exists on main with other content (use --replace)")
            load_briefs({**files, path: data})  # the set must still hold together
            tree = forge.tree_with(head, path, data)
            verb = "Update" if old is not None else "Add"
            commit = forge.commit_tree(
                tree,
                parents=[head] if head is not None else [],
                message=f"{verb} brief {brief.id}: {brief.title}\n",
                author=identity,
            )
            pushed = forge.push([RefUpdate(MAIN, commit, head)])
            if pushed.ok:
                return {**result, "commit": commit, "unchanged": False}
            if not pushed.lost:
                raise ForgeUnavailable(f"the forge refused the push to main: {pushed.detail}")
        raise Busy(f"main moved under each of {CAS_ATTEMPTS} attempts to add {path}")
    finally:
        if isinstance(spec, str):
            forge.close()
