"""The embedded forge: a bare git repository that is a complete forge by itself.

``init_forge(path)`` creates it: ``main`` holds ``briefs/`` and a ``.gitattributes`` that
marks ``.assay/**`` as generated (so review diffs collapse journals); claims, events,
evidence, reviews and status live under ``refs/assay/*`` and appear as they are written.
"""

from __future__ import annotations

from pathlib import Path

import assay.refs as refs
from assay.errors import BadInput
from assay.plumbing import (
    ASSAY_IDENTITY,
    init_bare,
    local_refs,
    run_git,
    write_commit,
    write_tree,
)

MAIN = refs.MAIN

GITATTRIBUTES = b".assay/** linguist-generated=true\n"

BRIEFS_README = b"""# briefs/

One brief per file: `briefs/<id>.md`. The id (the file name without `.md`) may hold
letters, digits, `-`, `_` and `.`. Commit a brief to `main` and a desk can claim it.
"""


def is_forge(path: Path) -> bool:
    """True when ``path`` is a bare repository whose main holds a forge layout."""
    if not ((path / "HEAD").is_file() and (path / "objects").is_dir()):
        return False
    return MAIN in local_refs(path, MAIN)


def ref_tips(path: Path | str, prefixes: tuple[str, ...]) -> dict[str, str]:
    """``{ref: sha}`` of the embedded forge at ``path`` under each of ``prefixes``, read
    straight from its ref files (no git process): what its own push hook and waker watch."""
    found: dict[str, str] = {}
    for prefix in prefixes:
        found.update(local_refs(Path(path), prefix))
    return dict(sorted(found.items()))


def init_forge(path: Path) -> Path:
    """Create an embedded forge at ``path`` (idempotent on an existing forge)."""
    path = Path(path).expanduser().resolve()
    if path.exists() and any(path.iterdir()):
        if is_forge(path):
            return path
        raise BadInput(f"forge init {path}: the directory exists and is not an Assay forge")
    init_bare(path)
    run_git(["config", "http.receivepack", "true"], git_dir=path)
    run_git(["config", "receive.advertisePushOptions", "false"], git_dir=path)
    run_git(["config", "assay.forge", "1"], git_dir=path)
    tree = write_tree(path, {".gitattributes": GITATTRIBUTES, "briefs/README.md": BRIEFS_README})
    commit = write_commit(
        path,
        tree=tree,
        parents=[],
        message="Start the forge: briefs/ and .gitattributes",
        author=ASSAY_IDENTITY,
    )
    run_git(["update-ref", MAIN, commit, ""], git_dir=path)
    return path
