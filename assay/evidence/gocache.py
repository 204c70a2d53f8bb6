"""A warm Go build cache for ``go test`` rows: filled by main's run, copied for each row.

A row's sandbox has a ``HOME`` of its own, so ``go test`` builds in a cold cache in every
row, and most of that is ``go vet`` (which ``go test`` runs) working out its facts about
the standard library: about 1.3 s of a 1.7 s row for a one-test package. One cache shared
by the rows would let one row's code rewrite what the next row, or main's count, is built
from; a read-only one is not enough either, since go 1.19 fails outright when it cannot
write an entry it needs ("read-only file system").

So main's own run at the brief's base (the baseline: main's code, which the gate trusts)
fills a cache of its own; the gate keeps it in its state folder (``go-build/<base>``, the
newest ``KEPT``), and each go row starts from a copy of it: the seed is bound read-only into
the row's sandbox, and the gate's ``assay_gate_go_cache`` copies it into the sandbox's own
``/tmp`` (a tmpfs: a copy in the report folder, on disk, cost as much as the cold build on
a busy machine) before it becomes the row's command. A row whose main runs none of its
tests, or whose base's cache is gone, builds cold, as before.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

KEPT = 8
ENTRY = "go-build"


class GoCaches:
    """Main's Go build caches, one per base commit, in the gate's ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @staticmethod
    def empty(into: Path) -> Path:
        """A fresh cache in ``into`` (a report folder), for main's run to fill."""
        path = into / ENTRY
        path.mkdir(mode=0o700)
        return path

    def keep(self, base: str, cache: Path) -> None:
        """Keep ``cache``, which main's run at ``base`` filled, for the rows to start from."""
        if not cache.is_dir() or not any(cache.iterdir()):
            return
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        staging = self.folder / f".{base}.{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(cache, staging, symlinks=True)
        target = self.folder / base
        shutil.rmtree(target, ignore_errors=True)
        try:
            os.replace(staging, target)
        except OSError:  # another gate kept this base's cache meanwhile: theirs stays
            shutil.rmtree(staging, ignore_errors=True)
        self._prune()

    def seed(self, base: str) -> Path | None:
        """Main's cache at ``base``, for a row to copy (``assay_gate_go_cache``), or None
        when there is none (the row then builds cold)."""
        seed = self.folder / base
        try:
            os.utime(seed)  # in use: the newest, the last one pruned
        except OSError:
            return None
        return seed

    def _prune(self) -> None:
        kept = sorted(
            (p for p in self.folder.iterdir() if p.is_dir() and not p.name.startswith(".")),
            key=lambda p: p.stat().st_mtime,
            reverse=True,
        )
        for old in kept[KEPT:]:
            with contextlib.suppress(OSError):
                shutil.rmtree(old)
