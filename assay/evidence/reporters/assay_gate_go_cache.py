"""The gate's start for a go row: a private copy of main's Go build cache, then the row.

Run inside the row's sandbox as ``assay_gate_go_cache SEED -- ROW ARGV...``: it copies the
cache main's run at the base filled (``SEED``, bound read-only) into the sandbox's own
``/tmp`` (a tmpfs that dies with the row), points ``GOCACHE`` at the copy and becomes the
row's command. The row writes only its copy, so no row's code reaches what the next row,
or main's count, is built from (``assay.evidence.gocache``). A seed it cannot copy leaves
the row to build cold, as it would without one.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile


def main(argv: list[str]) -> int:
    seed, rest = argv[1], argv[2:]
    if rest[:1] == ["--"]:
        rest = rest[1:]
    if not rest:
        return 2
    try:
        target = os.path.join(tempfile.mkdtemp(prefix="assay-go-"), "go-build")
        shutil.copytree(seed, target, symlinks=True)
        os.environ["GOCACHE"] = target
    except OSError:
        pass
    try:
        os.execvp(rest[0], rest)
    except OSError as exc:  # as a shell says it: not found 127, not runnable 126
        print(f"{rest[0]}: {exc.strerror}", file=sys.stderr)
        return 127 if isinstance(exc, FileNotFoundError) else 126


if __name__ == "__main__":
    sys.exit(main(sys.argv))
