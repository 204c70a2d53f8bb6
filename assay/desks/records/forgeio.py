"""The few forge operations the desk layer needs, in one place, over ``assay.forge``.

Reading a JSON file at a ref, and writing a child commit to a ref as a compare-and-swap
push (retried against a fresh read when another writer moved the ref first). Review
records and judge checkouts use these; claims, events and branches have their own stores.
"""

from __future__ import annotations

import json
from typing import Any

from assay.errors import Busy, Corrupt
from assay.forge import Forge
from assay.plumbing import Identity, RefUpdate

DESK_IDENTITY = Identity(name="assay desk", email="desk@assay.invalid")


def ref_sha(forge: Forge, ref: str) -> str | None:
    """The sha ``ref`` points at on the forge (fetched into the cache when it moved), or None."""
    found = forge.refresh([ref])
    return found.get(ref)


def read_json_at_ref(forge: Forge, ref: str, path: str) -> tuple[str, Any] | None:
    """``(sha, parsed JSON of path)`` at the tip of ``ref``, or None when the ref is absent."""
    sha = ref_sha(forge, ref)
    if sha is None:
        return None
    return sha, read_json_blob(forge, ref, sha, path)


def read_json_blob(forge: Forge, ref: str, sha: str, path: str) -> Any:
    """The parsed JSON of ``path`` in commit ``sha`` of ``ref`` (already fetched)."""
    raw = forge.read_blob(sha, path)
    if raw is None:
        raise Corrupt(f"{ref} at {sha[:12]} has no {path}")
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise Corrupt(f"{ref} at {sha[:12]}: {path} is not JSON: {exc}") from exc


def cas_write_json(
    forge: Forge,
    ref: str,
    files: dict[str, bytes],
    *,
    message: str,
    author: Identity,
    attempts: int = 5,
) -> str:
    """Write ``files`` as a child commit of ``ref``'s tip; CAS, retried on a lost race."""
    for _ in range(attempts):
        old = ref_sha(forge, ref)
        sha = forge.commit(files, parents=[old] if old else [], message=message, author=author)
        outcome = forge.push([RefUpdate(ref=ref, new=sha, expected=old)])
        if outcome.ok:
            return sha
    raise Busy(f"{ref} kept moving under {attempts} attempts to update it")
