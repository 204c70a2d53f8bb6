"""A plain protocol-v2 ``fetch`` answered by ``assay forge serve`` in its own process.

A desk's view fetches the few tips it lacks, and a contender that finds a claim fetches
the winner's record: one request each, every ``have`` offered and ``done`` said at once
(:mod:`assay.forge.fetchpack`). ``git upload-pack`` answered each with a process of its
own. This module answers such a request as upload-pack does, with its ``packfile``
section (the pack on side band 1, then a flush). The pack's objects are those reachable
from the wants and not from the haves, chosen as a push chooses them
(:func:`assay.forge.sendpack.pack_reachable`).

Taken here only when it is plain, and otherwise left to git, which answers in its own
words:

- ``done`` said (no negotiation round);
- no argument but ``want``, ``have``, ``done``, ``no-progress``, ``ofs-delta`` and
  ``thin-pack``, and no capability but ``agent``, ``object-format=sha1`` and
  ``session-id``;
- every want a commit that a ref reaches: the ref an ``ls-refs`` answered here named
  for it (at that value or past it: a claim renewed while a view read it), or else the
  tip of any ref (``RefServer.may_serve``);
- no more than :data:`assay.forge.sendpack.MAX_COMMITS` commits to send;
- a forge with no ``uploadpack.*`` or ``transfer.*`` setting and no alternates.

Any other want (a tree, an object no ref reaches, an ancestor no answer named) is left
to git too: upload-pack's own rules decide what it serves. A pack without progress and
without deltas is a valid answer to ``thin-pack`` and to a client that did not ask for
``no-progress``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from assay.forge.smarthttp import FLUSH, Command, pkt_line, sideband

_OID = re.compile(r"[0-9a-f]{40}")
_FLAGS = frozenset({"done", "no-progress", "ofs-delta", "thin-pack"})
_CAPABILITIES = ("agent=", "session-id=")
_ACTIVE_SECTIONS = ("uploadpack.", "transfer.")


def fetch_answer(
    git_dir: Path,
    repo: Any,
    command: Command,
    *,
    may_serve: Callable[[Sequence[str]], bool],
    config: Any,
) -> bytes | None:
    """upload-pack's answer to the v2 ``command`` (a ``fetch``) on the forge at ``git_dir``
    (``repo``: a libgit2 handle of it; ``may_serve``: whether its refs reach every one of
    some ids, as ``RefServer.may_serve`` judges; ``config``: its own config), or None when
    ``git upload-pack`` must answer (see the module docstring)."""
    import pygit2

    from assay.forge.sendpack import NeedsGit, pack_reachable

    if command.name != "fetch" or not _plain_capabilities(command.capabilities):
        return None
    wants: list[str] = []
    haves: list[str] = []
    done = False
    for argument in command.arguments:
        word, _, oid = argument.partition(" ")
        if word in ("want", "have") and _OID.fullmatch(oid):
            (wants if word == "want" else haves).append(oid)
        elif argument in _FLAGS:
            done = done or argument == "done"
        else:
            return None
    if not done or not wants or not may_serve(wants):
        return None
    if not _plain_forge(git_dir, config):
        return None
    try:
        if not all(isinstance(repo[oid], pygit2.Commit) for oid in wants):
            return None
        pack = pack_reachable(repo, wants, hidden=haves)
    except (NeedsGit, KeyError, ValueError, pygit2.GitError):
        return None  # past the limit, or an object the forge lacks: git's to say
    return pkt_line(b"packfile\n") + sideband(1, pack) + FLUSH


def _plain_capabilities(capabilities: Iterable[str]) -> bool:
    return all(
        line.startswith(_CAPABILITIES) or line == "object-format=sha1" for line in capabilities
    )


def _plain_forge(git_dir: Path, config: Any) -> bool:
    """No setting that changes what upload-pack serves (hidden refs, a pack-objects hook,
    which wants it allows), and no alternates."""
    if (git_dir / "objects" / "info" / "alternates").exists():
        return False
    return not any(entry.name.lower().startswith(_ACTIVE_SECTIONS) for entry in config)
