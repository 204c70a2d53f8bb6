"""One pusher of a host's group, as its own process: ``python -m tests.forge.group_pusher``.

``--forge URL --ref REF --status FILE``: open the forge (its cache under ``$ASSAY_STATE``,
shared with the other pushers of the test's host), join the host's group, write a commit
holding ``REF`` and push it as a create (a CAS: the ref must not exist). The outcome goes
to ``--status`` as JSON (``{"outcome": ..., "commit": ...}``); exit 0 when it landed, 4
when the race was lost.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from assay.forge import open_forge
from assay.plumbing import Identity, RefUpdate


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--forge", required=True)
    parser.add_argument("--ref", required=True)
    parser.add_argument("--status", required=True)
    args = parser.parse_args(argv)
    with open_forge(args.forge) as forge:
        forge.join_group()
        commit = forge.commit(
            {"ref.txt": args.ref.encode()},
            parents=[],
            message=f"{args.ref} by {os.getpid()}",
            author=Identity("pusher", "pusher@test.invalid"),
        )
        result = forge.push([RefUpdate(args.ref, commit, expected=None)])
    status = Path(args.status)
    status.write_text(json.dumps({"outcome": result.outcome.value, "commit": commit}))
    return 0 if result.ok else 4


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
