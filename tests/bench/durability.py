"""Pushes per brief in each durability mode: ``python -m tests.bench.durability``.

One brief at a time, run by ``assay desk run --once`` (a real process) on an embedded
forge whose pre-receive hook writes one line per push it receives (the forge's own count;
every ref: the claim, the branch's checkpoints, the settled claim with the review). The
scripted agent desk answers instantly, so in ``window`` mode no window runs out inside a
brief: what is measured is the pushes the mode makes at its fixed points. Lease renewals
ride in those pushes or, alone, go once per half lease: the lease here (300 s) is long
enough that none falls inside a brief.

Beside them, an agent-CLI desk (Codex through the model gateway, ``tests.bench.clidesk``'s
harness) on a 40-call session against the scripted upstream: each call is a journaled
model step and each of its commands a tool run in the sandbox, so the brief takes long
enough for ``window`` mode's 30-second window to run out in it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

from tests.bench.desks import desk_argv, env, make_world
from tests.desks.world import count_pushes

MODES = ("step", "window", "exit")
WINDOW_TARGET = 4  # issue: at most 4 pushes per brief in window mode, whatever the calls


def pushes_per_brief(mode: str, calls: int) -> dict[str, Any]:
    """One brief of ``calls`` model calls (``calls - 1`` file writes, then ``finish``)."""
    with tempfile.TemporaryDirectory(prefix="bench-durability-") as tmp:
        root = Path(tmp)
        forge_path, desks = make_world(root, 1, turns=calls - 1, lease=300)
        manifest = desks / "coder.yaml"
        data = yaml.safe_load(manifest.read_text(encoding="utf-8"))
        manifest.write_text(yaml.safe_dump({**data, "durability": mode}), encoding="utf-8")
        log = count_pushes(forge_path)
        done = subprocess.run(
            desk_argv(forge_path, desks, "--once", "--json"),
            env=env(root / "state"),
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{mode}, {calls} calls: exit {done.returncode}: {done.stderr}")
        runs = json.loads(done.stdout)["runs"]
        assert runs and runs[0]["code"] == 0, runs
        lines = [line.split() for line in log.read_text(encoding="utf-8").splitlines()]
        brief = [refs for refs in lines if any(ref.endswith("/b000") for ref in refs)]
        branch = sum(1 for refs in brief if "refs/heads/assay/b000" in refs)
        return {"mode": mode, "calls": calls, "pushes": len(brief), "branch_pushes": branch}


CLI_CALLS = 40


def cli_pushes_per_brief(mode: str, calls: int = CLI_CALLS) -> dict[str, Any]:
    """One brief of an agent-CLI desk (Codex) whose session is ``calls`` model calls:
    ``calls - 1`` commands, then its answer; pushes counted by the forge's hook."""
    import os
    import time

    from assay.demo.upstream import WireFake
    from assay.forge import init_forge
    from tests.bench.clidesk import CLIS, KEY, PROMPT, cli_path
    from tests.conftest import assay_argv
    from tests.desks.world import World, brief_text

    cli = CLIS["codex"]
    session: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "exec_command", "arguments": {"cmd": f"echo {n} >> a.txt"}}]}
        for n in range(calls - 1)
    ]
    session.append({"content": "Wrote a.txt."})
    with tempfile.TemporaryDirectory(prefix="bench-durability-cli-") as tmp:
        root = Path(tmp)
        world = World(root, init_forge(root / "forge.git"))
        world.add_briefs(brief_text("c000", body=PROMPT))
        log = count_pushes(world.forge_path)
        with WireFake(session) as fake:
            manifest = {
                "name": cli.profile,
                "kind": "cli",
                "takes": {"globs": ["*"]},
                "cli": {"profile": cli.profile},
                "model": {**cli.model, "base_url": fake.openai_base_url, "api_key_env": "KEY"},
                "tools": list(cli.tools),
                "lease": "300s",
                "durability": mode,
                "sandbox": {"toolchains": ["python", "node"]},
            }
            (world.desks / f"{cli.profile}.yaml").write_text(yaml.safe_dump(manifest))
            env_ = world.env("a", {"KEY": KEY})
            env_["PATH"] = os.pathsep.join([str(cli_path(cli.binary).parent), env_["PATH"]])
            started = time.monotonic()
            done = subprocess.run(
                assay_argv(*world.desk_args(cli.profile, "--once", "--json")),
                cwd=root,
                env=env_,
                capture_output=True,
                text=True,
                timeout=900,
            )
            seconds = time.monotonic() - started
            paid = fake.answered
        if done.returncode != 0:
            raise RuntimeError(f"cli {mode}: exit {done.returncode}: {done.stderr[-2000:]}")
        lines = [line.split() for line in log.read_text(encoding="utf-8").splitlines()]
        brief = [refs for refs in lines if any(ref.endswith("/c000") for ref in refs)]
        branch = sum(1 for refs in brief if "refs/heads/assay/c000" in refs)
        return {
            "mode": mode,
            "calls": paid,
            "pushes": len(brief),
            "branch_pushes": branch,
            "seconds": round(seconds, 1),
            "desk": "cli",
        }


def group_overhead(pushes: int = 60) -> dict[str, Any]:
    """A claim-sized push (one commit, one ref) by a handle in its host's group beside one
    pushing alone, over smart HTTP to a served embedded forge: the median of ``pushes``
    each, alternated, uncontended (nothing else to carry: the group's direct path)."""
    import itertools
    import os
    import statistics
    import time

    from assay.forge import ForgeServer, init_forge, open_forge
    from assay.plumbing import Identity, RefUpdate

    names = itertools.count()
    times: dict[bool, list[float]] = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="bench-group-") as tmp:
        root = Path(tmp)
        saved = os.environ.get("ASSAY_STATE")
        os.environ["ASSAY_STATE"] = str(root / "state")
        try:
            with ForgeServer(init_forge(root / "forge.git")) as server:
                handles = {grouped: open_forge(server.url) for grouped in (False, True)}
                handles[True].join_group()
                for _ in range(pushes):
                    for grouped, forge in handles.items():
                        ref = f"refs/assay/claims/bench-{next(names)}"
                        commit = forge.commit(
                            {"x": ref.encode()},
                            parents=[],
                            message=ref,
                            author=Identity("bench", "bench@bench.invalid"),
                        )
                        started = time.perf_counter()
                        assert forge.push([RefUpdate(ref, commit, expected=None)]).ok
                        times[grouped].append(time.perf_counter() - started)
                for forge in handles.values():
                    forge.close()
        finally:
            if saved is None:
                os.environ.pop("ASSAY_STATE", None)
            else:
                os.environ["ASSAY_STATE"] = saved
    alone_ms, grouped_ms = (statistics.median(times[g]) * 1000 for g in (False, True))
    return {"mode": "group", "alone_ms": alone_ms, "grouped_ms": grouped_ms}


def measure(*, sizes: tuple[int, ...] = (4, 20), cli: bool = True) -> list[dict[str, Any]]:
    found = [pushes_per_brief(mode, calls) for calls in sizes for mode in MODES]
    found.append(group_overhead())
    if cli:
        try:
            found += [cli_pushes_per_brief(mode) for mode in MODES]
        except (RuntimeError, SystemExit) as missing:  # the CLI not installed here
            found.append({"mode": "cli", "error": str(missing)})
    return found


def rows(found: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    out = []
    for item in found:
        if "error" in item:
            out.append(("durability: agent-CLI desk", "n/a", str(item["error"])[:200]))
            continue
        if item["mode"] == "group":
            ratio = item["grouped_ms"] / item["alone_ms"]
            out.append(
                (
                    "group commit: a push with nothing else to carry (ms)",
                    f"{item['grouped_ms']:.2f}",
                    f"alone: {item['alone_ms']:.2f} ms ({ratio:.2f}x); median of 60, smart "
                    "HTTP to a served embedded forge",
                )
            )
            continue
        mode, calls = item["mode"], item["calls"]
        if item.get("desk") == "cli":
            out.append(
                (
                    f"durability: pushes per brief, {mode} mode, {calls}-call agent-CLI desk",
                    str(item["pushes"]),
                    f"Codex through the gateway, {item['seconds']} s a brief; "
                    f"{item['branch_pushes']} of them to the branch",
                )
            )
            continue
        target = {
            "step": "today's behaviour: a push per model call",
            "window": f"target at most {WINDOW_TARGET} whatever the number of calls",
            "exit": "only the end (and waits)",
        }[mode]
        out.append(
            (
                f"durability: pushes per brief, {mode} mode, {calls}-call scripted brief",
                str(item["pushes"]),
                f"{target}; {item['branch_pushes']} of them to the branch, the rest the "
                "claim and the settled claim with the review",
            )
        )
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args(argv)
    found = measure()
    if options.json:
        print(json.dumps(found, indent=2))
    for name, value, note in rows(found):
        print(f"{name}: {value} ({note})")


if __name__ == "__main__":
    main()
