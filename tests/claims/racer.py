"""Race helper: N real ``assay claim acquire`` processes released at one instant.

``python -m tests.claims.racer --forge URL --n 16`` imports Assay once, then for every
brief id read from stdin forks N children. Each child blocks on a shared pipe (the
barrier); closing the pipe releases all of them at once, and each runs the real CLI entry
point ``assay claim acquire BRIEF --desk racer-<i> --json`` and exits with its code. The
parent prints one JSON line per round: ``{"codes": [...], "outputs": [...]}``.
Forking after the import keeps a round fast enough for many rounds per test.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import sys
import tempfile

from assay.cli.main import main as assay_main


def _child(barrier: int, out_path: str, argv: list[str]) -> None:
    os.read(barrier, 1)  # returns b"" when the parent closes the write end: go
    fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.close(fd)
    sys.stdout = os.fdopen(1, "w", closefd=False)
    assay_main(argv)  # always ends in sys.exit(code)


def race(url: str, brief: str, n: int, lease: float) -> dict[str, list[object]]:
    read_end, write_end = os.pipe()
    outdir = tempfile.mkdtemp(prefix="racer-")
    children: list[tuple[int, str]] = []
    sys.stdout.flush()
    sys.stderr.flush()
    for i in range(n):
        out_path = os.path.join(outdir, f"{i}.out")
        argv = ["claim", "acquire", brief, "--desk", f"racer-{i}", "--lease", str(lease)]
        argv += ["--forge", url, "--json"]
        pid = os.fork()
        if pid == 0:
            os.close(write_end)
            code = 70
            try:
                _child(read_end, out_path, argv)
            except SystemExit as done:
                code = done.code if isinstance(done.code, int) else 1
            finally:
                sys.stdout.flush()
                atexit._run_exitfuncs()  # close the child's forge (its cache namespace)
                os._exit(code)
        children.append((pid, out_path))
    os.close(read_end)
    os.close(write_end)  # the barrier opens
    codes: list[object] = []
    outputs: list[object] = []
    for pid, out_path in children:
        _, status = os.waitpid(pid, 0)
        codes.append(os.waitstatus_to_exitcode(status))
        with open(out_path) as handle:
            outputs.append(handle.read())
        os.unlink(out_path)
    os.rmdir(outdir)
    return {"codes": codes, "outputs": outputs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--forge", required=True)
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--lease", type=float, default=60.0)
    args = parser.parse_args()
    for line in sys.stdin:
        brief = line.strip()
        if not brief:
            continue
        result = race(args.forge, brief, args.n, args.lease)
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
