"""The cost of a brief: ``python -m tests.bench.cost [--briefs N] [--desks N]``.

Prints figures; it is not a timed test. A fleet of real desk processes (``tests.torture.fleet``:
``assay forge serve`` over smart HTTP, ``assay desk run`` per desk, the scripted model) runs
N briefs, and this counts:

- git processes per brief: every desk gets a ``git`` wrapper first on its ``PATH`` that
  notes the subcommand in a file and then runs the real git (the forge server's own git
  children are not counted; they are the forge's, not the desk's);
- CPU-seconds per brief for the whole fleet: user + system time of every desk process and
  of the forge server, each with every child it waited for (git, http-backend), read from
  ``wait4`` for desks and ``/proc/<pid>/stat`` (utime, stime, cutime, cstime) for the server
  just before it is stopped;
- processes the forge server starts per brief: an audit hook (a ``sitecustomize`` on the
  server's ``PYTHONPATH`` only) notes every ``subprocess.Popen`` the server makes; a
  ``git http-backend`` counts as two, itself and the ``upload-pack``/``receive-pack`` it
  starts (git finds that one through its exec path, past any ``PATH`` wrapper).

The breakdown by subcommand says where the processes go.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.bench import baseline
from tests.torture.fleet import Fleet, invariant_problems

_WRAPPER = """#!/bin/sh
skip=
for a in "$@"; do
  if [ -n "$skip" ]; then skip=; continue; fi
  case "$a" in
    -c|-C) skip=1 ;;
    -*) ;;
    *) echo "$a" >> "$ASSAY_GIT_COUNT"; break ;;
  esac
done
exec {git} "$@"
"""


_SPAWN_CENSUS = """import os, sys
_LOG = os.environ.get("ASSAY_SERVER_SPAWNS")
def _note(event, args):
    if event == "subprocess.Popen" and _LOG:
        argv = [os.path.basename(str(a)) for a in list(args[1])[:2]]
        name = argv[0] if argv[0] != "git" or len(argv) < 2 else argv[1]
        with open(_LOG, "a") as log:
            log.write(name + "\\n")
if _LOG:
    sys.addaudithook(_note)
"""


def _server_census(directory: Path) -> Path:
    """A directory whose ``sitecustomize`` logs the server's spawns to ``$ASSAY_SERVER_SPAWNS``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sitecustomize.py").write_text(_SPAWN_CENSUS, encoding="utf-8")
    return directory


def _server_processes(log: Path) -> Counter[str]:
    spawns = Counter(log.read_text().split()) if log.exists() else Counter()
    # http-backend is two processes: itself and the service it starts.
    backend = sum(n for name, n in spawns.items() if "http-backend" in name)
    return spawns + Counter({"(service of http-backend)": backend}) if backend else spawns


def git_wrapper(directory: Path) -> Path:
    """A directory whose ``git`` counts its invocations into ``$ASSAY_GIT_COUNT``."""
    real = shutil.which("git")
    if real is None:
        raise SystemExit("git is not on PATH")
    directory.mkdir(parents=True, exist_ok=True)
    wrapper = directory / "git"
    wrapper.write_text(_WRAPPER.format(git=real), encoding="utf-8")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return directory


def _proc_cpu(pid: int, *, children: bool = True) -> float:
    """utime + stime (+ cutime + cstime) of a live process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(v) for v in fields[11 : 15 if children else 13])
    return ticks / os.sysconf("SC_CLK_TCK")


def measure(*, briefs: int, desks: int, keep: bool = False) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="assay-bench-cost-"))
    fleet = Fleet(root, [f"c{i:04d}" for i in range(briefs)], lease=120)
    counts = root / "git-count.txt"
    spawn_log = root / "server-spawns.txt"
    wrapped = git_wrapper(root / "bin")
    original_env = fleet.env

    # *more: Fleet.env's extra variables, which a baseline tree's Fleet may not take yet
    def env(machine: str, *more: dict[str, str] | None) -> dict[str, str]:
        found = original_env(machine, *more)
        found["PATH"] = f"{wrapped}{os.pathsep}{found.get('PATH', '')}"
        found["ASSAY_GIT_COUNT"] = str(counts)
        return found

    fleet.env = env  # type: ignore[method-assign,assignment]
    try:
        fleet.setup()
        census = _server_census(root / "census")
        saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "ASSAY_SERVER_SPAWNS")}
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(census), saved["PYTHONPATH"]]))
        os.environ["ASSAY_SERVER_SPAWNS"] = str(spawn_log)
        try:
            fleet.serve()
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        assert fleet.server is not None
        started_spawns = _server_processes(spawn_log)
        server_cpu_before = _proc_cpu(fleet.server.pid)
        server_self_before = _proc_cpu(fleet.server.pid, children=False)
        cpu: list[float] = []
        started = time.monotonic()
        for _ in range(desks):
            fleet.start_desk()
        deadline = time.monotonic() + 3600
        pending = list(fleet.desks)
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError("desks still running")
            for desk in list(pending):
                pid, status, usage = os.wait4(desk.proc.pid, os.WNOHANG)
                if pid:
                    desk.code = os.waitstatus_to_exitcode(status)
                    desk.proc.returncode = desk.code
                    cpu.append(usage.ru_utime + usage.ru_stime)
                    pending.remove(desk)
            time.sleep(0.05)  # polling the process table, not synchronising with anything
        total = time.monotonic() - started
        server_cpu = _proc_cpu(fleet.server.pid) - server_cpu_before
        server_self = _proc_cpu(fleet.server.pid, children=False) - server_self_before
        load = os.getloadavg()
        results = fleet.inspect()
        problems = invariant_problems(fleet, results)
        commands = Counter(counts.read_text().split()) if counts.exists() else Counter()
        served = _server_processes(spawn_log) - started_spawns
        return {
            "briefs": briefs,
            "desks": desks,
            "total_s": total,
            "briefs_per_min": briefs / total * 60,
            "git_per_brief": sum(commands.values()) / briefs,
            "git_commands": {k: v / briefs for k, v in commands.most_common()},
            "cpu_per_brief": (sum(cpu) + server_cpu) / briefs,
            "desk_cpu_per_brief": sum(cpu) / briefs,
            "server_cpu_per_brief": server_cpu / briefs,
            "server_self_cpu_per_brief": server_self / briefs,
            "server_processes_per_brief": sum(served.values()) / briefs,
            "server_processes": {k: v / briefs for k, v in served.most_common()},
            "load": " ".join(f"{x:.1f}" for x in load),
            "problems": problems[:10],
        }
    finally:
        fleet.stop()
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def rows(f: dict[str, Any]) -> list[tuple[str, str, str]]:
    label = f"cost ({f['briefs']} briefs x {f['desks']} desks)"
    top = ", ".join(f"{k} {v:.1f}" for k, v in list(f["git_commands"].items())[:8])
    return [
        (f"{label}: git processes per brief", f"{f['git_per_brief']:.1f}", top),
        (
            f"{label}: CPU-seconds per brief",
            f"{f['cpu_per_brief']:.3f} s",
            f"desks {f['desk_cpu_per_brief']:.3f} s + forge server "
            f"{f['server_cpu_per_brief']:.3f} s (its own Python "
            f"{f.get('server_self_cpu_per_brief', 0):.3f} s); load {f['load']}",
        ),
        (
            f"{label}: forge server processes per brief",
            f"{f.get('server_processes_per_brief', 0):.1f}",
            ", ".join(f"{k} {v:.1f}" for k, v in f.get("server_processes", {}).items()),
        ),
        (
            f"{label}: upload-pack per desk git fetch",
            f"{_per_fetch(f):.1f}" if f["git_commands"].get("fetch") else "none",
            "each stateless negotiation round is one more upload-pack"
            if f["git_commands"].get("fetch")
            else "no git fetch: a view's fetch is one request (assay.forge.fetchpack)",
        ),
        (f"{label}: briefs per minute", f"{f['briefs_per_min']:.1f}", "smart HTTP"),
        (f"{label}: invariant problems", str(len(f["problems"])), "must be 0"),
    ]


def _per_fetch(f: dict[str, Any]) -> float:
    fetches = f["git_commands"].get("fetch", 0)
    return f.get("server_processes", {}).get("upload-pack", 0) / fetches if fetches else 0.0


def side_by_side(before: dict[str, Any], after: dict[str, Any], ref: str) -> list[str]:
    """Markdown lines: each figure at ``ref`` and now, with the ratio and the target."""
    lines = [
        f"| measure | {ref} | this checkout | ratio | target |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for key, label, target in (
        ("git_per_brief", "git processes per brief", "at most 12"),
        ("cpu_per_brief", "CPU-seconds per brief (fleet)", "at most 0.3"),
        ("desk_cpu_per_brief", "of which desk processes", ""),
        ("server_cpu_per_brief", "of which the forge server", ""),
        ("server_self_cpu_per_brief", "of which the server's own Python", ""),
        ("server_processes_per_brief", "processes the forge server starts per brief", ""),
        ("briefs_per_min", "briefs per minute", ""),
    ):
        old, new = float(before[key]), float(after[key])
        ratio = f"{new / old:.2f}x" if old else "-"
        lines.append(f"| {label} | {old:.2f} | {new:.2f} | {ratio} | {target} |")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--briefs", type=int, default=40)
    parser.add_argument("--desks", type=int, default=4)
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON")
    parser.add_argument(
        "--baseline", metavar="REF", help="also measure commit REF first, side by side"
    )
    options = parser.parse_args(argv)
    size = ["--briefs", str(options.briefs), "--desks", str(options.desks)]
    before = baseline.figures(options.baseline, "cost", size) if options.baseline else None
    figures = measure(briefs=options.briefs, desks=options.desks)
    if options.json:
        print(json.dumps(figures, indent=2))
    for name, value, note in rows(figures):
        print(f"{name:<52} {value:>10}  {note}")
    for problem in figures["problems"]:
        print(f"  problem: {problem}")
    if before is not None:
        print("\n".join(side_by_side(before, figures, options.baseline)))


if __name__ == "__main__":
    main()
