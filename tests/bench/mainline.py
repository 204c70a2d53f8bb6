"""Benchmark: what merged briefs leave on the team's main.

N briefs (default 100) each go through a real ``command`` desk (the desk loop, its
checkpoints and journal on the brief's branch), the gate's ``verify`` and its ``merge``
on an embedded forge. Then main is counted beside what a team's repository should hold:
one commit per merged brief, and no tree entry outside the briefs' own files (no
``.assay/``); and the checkpoint commits and journal files the runs made, which stay on
their branches and run refs.

    python -m tests.bench.mainline [--briefs N]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

from assay.evidence.gate import merge, verify
from assay.forge import init_forge, open_forge
from tests.desks.world import World, brief_text

# The desk writes one file named after its brief; the brief's row checks it is there.
WORK = "import os, pathlib\npathlib.Path(os.environ['ASSAY_BRIEF_ID'] + '.txt').write_text('x')\n"


def _git(forge: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", f"--git-dir={forge}", *args], capture_output=True, text=True, check=True
    )
    return done.stdout


def run(briefs: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="assay-bench-mainline-") as scratch:
        root = Path(scratch)
        world = World(root=root, forge_path=init_forge(root / "forge.git"))
        ids = [f"b{index:03d}" for index in range(briefs)]
        rows = [{"id": "made", "run": f"test -f {brief}.txt"} for brief in ids]
        world.add_briefs(*(brief_text(b, verify=[row]) for b, row in zip(ids, rows, strict=True)))
        (world.desks / "work.py").write_text(WORK, encoding="utf-8")
        (world.desks / "cmd.yaml").write_text(
            "name: cmd\nkind: command\ntakes: {globs: ['*']}\n"
            f"command: [python3, {world.desks / 'work.py'}]\n",
            encoding="utf-8",
        )
        before = _git(world.forge_path, "rev-parse", "main").strip()
        before_files = set(_git(world.forge_path, "ls-tree", "-r", "--name-only", "main").split())
        started = time.perf_counter()
        reports = world.run_here("cmd", once=False)
        desk_s = time.perf_counter() - started
        assert sorted(r.brief for r in reports) == ids and all(r.code == 0 for r in reports)
        started = time.perf_counter()
        with open_forge(world.url, cache_dir=root / "gate-cache") as forge:
            for brief in ids:
                assert verify(forge, brief, verifier="gate:bench").passed
                merge(forge, brief)
        gate_s = time.perf_counter() - started
        main_commits = int(_git(world.forge_path, "rev-list", "--count", f"{before}..main"))
        files = set(_git(world.forge_path, "ls-tree", "-r", "--name-only", "main").split())
        outside = files - before_files - {f"{brief}.txt" for brief in ids}
        branch_commits = sum(
            int(_git(world.forge_path, "rev-list", "--count", f"{before}..assay/{brief}"))
            for brief in ids
        )
        journal_files = sum(
            len(
                _git(
                    world.forge_path, "ls-tree", "-r", "--name-only", f"assay/{b}", ".assay"
                ).split()
            )
            for b in ids
        )
    return {
        "briefs": briefs,
        "main_commits_added": main_commits,
        "main_entries_outside_briefs": len(outside),
        "branch_commits_kept_off_main": branch_commits,
        "journal_files_kept_off_main": journal_files,
        "desk_s_per_brief": desk_s / briefs,
        "gate_s_per_brief": gate_s / briefs,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--briefs", type=int, default=100, help="briefs to merge (default 100)")
    args = parser.parse_args(argv)
    figures = run(args.briefs)
    n = args.briefs
    print(f"main after {n} merged briefs        measured   target")
    print(f"  commits added                    {figures['main_commits_added']:>8}   {n:>6}")
    print(
        f"  entries outside briefs' files    {figures['main_entries_outside_briefs']:>8}   {0:>6}"
    )
    print("kept off main (branches, run refs)")
    print(f"  checkpoint commits               {figures['branch_commits_kept_off_main']:>8}")
    print(f"  journal files                    {figures['journal_files_kept_off_main']:>8}")
    desk, gate = figures["desk_s_per_brief"], figures["gate_s_per_brief"]
    print(f"per brief: desk {desk:.2f} s, gate {gate:.2f} s")


if __name__ == "__main__":
    main()
