"""Holdout content on the desk's side: a holdout row is hidden only while the desk lacks it.

The desk never holds the gate's key, so it cannot open a holdout row; but the content can
still reach it another way: an author who commits the holdout file to main, a checks
folder copied into the repository, a row sealed from a file the desk wrote. Once the
desk's tree or journal holds a holdout file, the row tests nothing the desk could not see.

So at ``verify``, once the rows are opened, the gate searches what the desk worked with at
the head, the head's tree and its checkpoint (work tree and journal), for each row's files:
the whole file (its line endings aside), as it is or as a JSON string (a journal line or
blob that carries it). A row found there fails with ``LEAKED``, which names no path and no
content. Files shorter than ``MIN_BYTES`` are not searched: their text is too common to
tell anything (``{}``, a one-line import).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from assay.evidence.holdout import OpenedRow
    from assay.forge import Forge

LEAKED = "holdout: its content is in the tree or journal the desk worked with: it was not hidden"
MIN_BYTES = 24
MAX_BLOB_BYTES = 16 * 1024 * 1024
_TREE_MODE = "40000"
_BLOB_MODES = ("100644", "100755", "120000")


def forms(data: bytes) -> list[bytes]:
    """How a holdout file would appear in a blob: its text with ``\\n`` line endings and no
    surrounding blank space, and that text as a JSON string holds it (both of json's ways
    with what is not ASCII). None when it is too short to tell anything."""
    text = data.replace(b"\r\n", b"\n").strip()
    if len(text) < MIN_BYTES:
        return []
    found = [text]
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError:
        return found
    for ascii_only in (True, False):
        escaped = json.dumps(decoded, ensure_ascii=ascii_only)[1:-1].encode("utf-8")
        if escaped not in found:
            found.append(escaped)
    return found


def leaked_rows(forge: Forge, commits: Iterable[str], rows: Sequence[OpenedRow]) -> set[str]:
    """The ids of the ``rows`` some file of which a blob of ``commits``' trees holds."""
    needles = {row.row.id: [f for data in row.files.values() for f in forms(data)] for row in rows}
    needles = {row: found for row, found in needles.items() if found}
    leaked: set[str] = set()
    if not needles:
        return leaked
    seen: set[str] = set()
    with forge.batch() as batch:
        pending = [f"{commit}:" for commit in dict.fromkeys(commits)]
        while pending and len(leaked) < len(needles):
            entries = batch.tree(pending.pop()) or {}
            for mode, sha in entries.values():
                if sha in seen:
                    continue
                seen.add(sha)
                if mode == _TREE_MODE:
                    pending.append(sha)
                    continue
                data = batch.blob(sha) if mode in _BLOB_MODES else None
                if data is None or len(data) > MAX_BLOB_BYTES:
                    continue
                text = data.replace(b"\r\n", b"\n")
                for row, found in needles.items():
                    if row not in leaked and any(needle in text for needle in found):
                        leaked.add(row)
    return leaked
