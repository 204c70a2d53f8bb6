"""The agent-CLI desk's cost: ``python -m tests.bench.clidesk [--briefs N] [--cli codex]``.

Prints figures; it is not a timed test. A ``kind: cli`` desk runs a real agent CLI (any
shipped profile's, as ``.ci/install`` installs them) through ``assay desk run`` on a local embedded
forge, against the scripted upstream (``assay.demo.upstream.WireFake``), for N briefs of a
three-turn session. Beside it, the same CLI runs the same session N times on its own against
the same upstream: no gateway, sandbox, journal, claim or forge. That is the floor, since
the agent's own start-up and work are paid either way.

Per brief, side by side: wall seconds; CPU-seconds, Assay's own (the desk process itself,
read from ``/proc`` while it runs) beside the CLI's own when it runs alone (``wait4``); git
processes (a ``git`` wrapper first on the desk's ``PATH``, as in ``tests.bench.cost``); model
calls paid upstream. The CLI's CPU inside the sandbox is not measured: a process in
bubblewrap's PID namespace never reaches its parent's ``wait4`` figures (a busy loop of
0.27 CPU-s there reads 0.002 s).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from assay.agentcli.profiles import get_profile
from assay.demo.upstream import WireFake, toolless_side
from assay.forge import init_forge
from tests.agentcli.clis import BINARIES, cli_env, cli_roots, write_files
from tests.bench.cost import git_wrapper
from tests.conftest import assay_argv
from tests.desks.world import World, brief_text

KEY = "sk-bench-cli-upstream-key-7d21"
PROMPT = "Write a.txt, then show it."


@dataclass(frozen=True)
class Cli:
    """How one agent CLI is driven here: its binary, profile, model, tools and session."""

    binary: str
    profile: str
    model: dict[str, Any]
    tools: tuple[str, ...]
    session: Callable[[], list[dict[str, Any]]]
    fake: dict[str, Any] = field(default_factory=dict)  # WireFake's options for its calls


COMMANDS = ("echo hello > a.txt", "cat a.txt")  # each brief's session: two commands, an answer


def _codex_session() -> list[dict[str, Any]]:
    turns = [{"tool_calls": [{"name": "exec_command", "arguments": {"cmd": c}}]} for c in COMMANDS]
    return [*turns, {"content": "Wrote and showed a.txt."}]


def _claude_session() -> list[dict[str, Any]]:
    calls = [{"name": "Bash", "arguments": {"command": c, "description": "run"}} for c in COMMANDS]
    return [*({"tool_calls": [c]} for c in calls), {"content": "Wrote and showed a.txt."}]


def _shell_session(tool: str, **extra: str) -> Callable[[], list[dict[str, Any]]]:
    """Two commands through the CLI's shell tool ``tool`` (``{command}`` and ``extra``)."""

    def session() -> list[dict[str, Any]]:
        calls = [{"name": tool, "arguments": {"command": c, **extra}} for c in COMMANDS]
        return [*({"tool_calls": [c]} for c in calls), {"content": "Wrote and showed a.txt."}]

    return session


def _mini_session() -> list[dict[str, Any]]:
    turns = _shell_session("bash")()[:-1]
    submit = {
        "name": "bash",
        "arguments": {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"},
    }
    return [*turns, {"tool_calls": [submit]}]


def _aider_session() -> list[dict[str, Any]]:
    # aider runs no command: one answer in its whole edit format writes a.txt
    return [{"content": "Writing a.txt.\n\na.txt\n```\nhello\n```\n"}]


CLIS = {
    "codex": Cli(
        "codex",
        "codex",
        {"adapter": "openai", "model": "gpt-5-codex"},
        ("exec_command",),
        _codex_session,
    ),
    "claude-code": Cli(
        "claude",
        "claude-code",
        {"adapter": "anthropic", "model": "claude-sonnet-4-5"},
        ("Bash",),
        _claude_session,
    ),
    "gemini-cli": Cli(
        "gemini",
        "gemini-cli",
        {"adapter": "gemini", "model": "gemini-2.5-pro"},
        ("run_shell_command",),
        _shell_session("run_shell_command"),
    ),
    "qwen-code": Cli(
        "qwen",
        "qwen-code",
        {"adapter": "openai", "model": "fake-model"},
        ("run_shell_command",),
        _shell_session("run_shell_command", description="run"),
    ),
    "opencode": Cli(
        "opencode",
        "opencode",
        {"adapter": "openai", "model": "fake-model"},
        ("bash",),
        _shell_session("bash", description="run"),
    ),
    "mini-swe-agent": Cli(
        "mini",
        "mini-swe-agent",
        {"adapter": "openai", "model": "fake-model"},
        ("bash",),
        _mini_session,
    ),
    "aider": Cli(
        "aider",
        "aider",
        {"adapter": "openai", "model": "fake-model"},
        (),
        _aider_session,
        {"by": "replies", "is_side": toolless_side},
    ),
}


@dataclass(frozen=True)
class Figures:
    """What N briefs cost one way: totals, divided per brief when printed."""

    briefs: int
    wall_s: float
    cpu_s: float
    git: Counter[str]
    paid: int  # conversation turns the upstream answered
    failed: int  # briefs that did not end as they should
    own_cpu_s: float  # of the first process alone: the desk's own Python, or the CLI alone


def cli_path(name: str) -> Path:
    """The installed CLI ``name``; an error that says how to install it when it is missing."""
    for root in cli_roots():
        if (root / BINARIES[name]).exists():
            return root / BINARIES[name]
    raise RuntimeError(f"agent CLI {name!r} is not installed: run .ci/install")


def _wait_cpu(proc: subprocess.Popen[bytes]) -> tuple[int, float, float]:
    """(exit code, user + system seconds of ``proc`` and every child it waited for, of
    ``proc`` alone). Its own share is read from ``/proc`` every 50 ms until it exits, so it
    misses at most the last 50 ms of its exit."""
    reaped: list[tuple[int, Any]] = []
    exited = threading.Event()

    def reap() -> None:
        _, status, usage = os.wait4(proc.pid, 0)
        reaped.append((status, usage))
        exited.set()

    threading.Thread(target=reap, daemon=True).start()
    own = 0.0
    while not exited.wait(0.05):  # a sample every 50 ms, until the exit itself
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    status, usage = reaped[0]
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_utime + usage.ru_stime, own


def through_assay(
    root: Path,
    cli: Cli,
    briefs: int,
    *,
    profile: Path | None = None,
    durability: str | None = None,
) -> Figures:
    """N briefs run by one ``assay desk run`` of a ``kind: cli`` desk (under cProfile, every
    thread on its own CPU clock, into ``profile``: ``tests.bench.profiled``), in the forge's
    default durability mode unless ``durability`` names one."""
    world = World(root, init_forge(root / "forge.git"))
    names = [f"cli-{i:03d}" for i in range(briefs)]
    world.add_briefs(*(brief_text(name, body=PROMPT) for name in names))
    counts = root / "git-count.txt"
    wrapped = git_wrapper(root / "bin")
    clis = str(cli_path(cli.binary).parent)
    with WireFake(cli.session(), **cli.fake) as fake:
        base_url = fake.openai_base_url if cli.model["adapter"] == "openai" else fake.url
        manifest = {
            "name": cli.profile,
            "kind": "cli",
            "takes": {"globs": ["*"]},
            "cli": {"profile": cli.profile},
            "model": {**cli.model, "base_url": base_url, "api_key_env": "BENCH_UPSTREAM_KEY"},
            "tools": list(cli.tools),
            "lease": "30s",
            "sandbox": {"toolchains": ["python", "node"]},
            **({"durability": durability} if durability else {}),
        }
        (world.desks / f"{cli.profile}.yaml").write_text(yaml.safe_dump(manifest))
        env = world.env("a", {"BENCH_UPSTREAM_KEY": KEY, "ASSAY_GIT_COUNT": str(counts)})
        env["PATH"] = os.pathsep.join([str(wrapped), clis, env.get("PATH", "")])
        argv = assay_argv(*world.desk_args(cli.profile))
        if profile is not None:
            argv[1:3] = ["-m", "tests.bench.profiled", str(profile)]
        started = time.monotonic()
        with open(root / "desk.log", "wb") as log:
            proc = subprocess.Popen(
                argv,
                cwd=root,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            code, cpu, own = _wait_cpu(proc)
        wall = time.monotonic() - started
        paid = fake.answered
    done = sum(_ready(world, name) for name in names)
    if code != 0:
        tail = (root / "desk.log").read_text(errors="replace")[-2000:]
        raise SystemExit(f"assay desk run exited {code}:\n{tail}")
    git = Counter(counts.read_text().split()) if counts.exists() else Counter()
    return Figures(briefs, wall, cpu, git, paid, briefs - done, own)


def _ready(world: World, brief: str) -> bool:
    review = world.review(brief)
    return review is not None and review.state == "ready"


def alone(root: Path, cli: Cli, briefs: int) -> Figures:
    """The same CLI and session run N times on its own against the scripted upstream."""
    binary = cli_path(cli.binary)
    wall = cpu = 0.0
    paid = failed = 0
    for i in range(briefs):
        work, home = root / f"work-{i}", root / f"home-{i}"
        work.mkdir(parents=True)
        home.mkdir()
        with WireFake(cli.session(), **cli.fake) as fake:
            launch = get_profile(cli.profile).launch(
                command=None,
                workdir=work,
                home=home,
                gateway_url=fake.url,
                token=KEY,
                model=str(cli.model["model"]),
                prompt=PROMPT,
                tools=cli.tools,
                mcp_url=None,
            )
            write_files(launch, home)
            started = time.monotonic()
            proc = subprocess.Popen(
                launch.argv,
                cwd=work,
                env=cli_env(launch, home, binary),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            code, used, _ = _wait_cpu(proc)
            wall += time.monotonic() - started
            cpu += used
            paid += fake.answered
        failed += code != 0 or not (work / "a.txt").exists()
    return Figures(briefs, wall, cpu, Counter(), paid, failed, cpu)


def rows(
    ours: Figures, floor: Figures, first: Figures | None = None
) -> list[tuple[str, str, str, str]]:
    """(measure, through Assay, alone, Assay's share) per brief; with ``first`` (the same
    desk run for one brief), Assay's CPU split into its start-up and each further brief."""
    n = ours.briefs
    git = ", ".join(f"{name} {count / n:.1f}" for name, count in ours.git.most_common(4))
    cli_cpu = floor.cpu_s / n
    own = ours.own_cpu_s / n
    found = [
        (
            "wall seconds per brief",
            f"{ours.wall_s / n:.2f}",
            f"{floor.wall_s / n:.2f}",
            f"+{(ours.wall_s - floor.wall_s) / n:.2f} ({ours.wall_s / floor.wall_s:.2f}x)",
        ),
        (
            "CPU-seconds per brief, Assay's own",
            f"{own:.2f}",
            f"{cli_cpu:.2f} (the CLI's own)",
            f"{own / cli_cpu:.2f}x the CLI's (target 0.5x): the desk process itself: claim, "
            "checkout, gateway, MCP, journal, pushes, review",
        ),
    ]
    if first is not None and n > 1:
        marginal = (ours.own_cpu_s - first.own_cpu_s) / (n - 1)
        found.append(
            (
                "CPU-seconds of each brief past the first, Assay's own",
                f"{marginal:.2f}",
                f"{cli_cpu:.2f}",
                f"{marginal / cli_cpu:.2f}x; the desk's start-up and first brief: "
                f"{first.own_cpu_s:.2f} s",
            )
        )
    return [
        *found,
        ("git processes per brief", f"{sum(ours.git.values()) / n:.1f}", "0", git or "none"),
        ("model calls paid per brief", f"{ours.paid / n:.1f}", f"{floor.paid / n:.1f}", ""),
        (f"briefs not finished (of {n})", str(ours.failed), str(floor.failed), "must be 0"),
    ]


def section_rows(found: list[tuple[str, str, str, str]], cli: str) -> list[tuple[str, str, str]]:
    """The rows as ``python -m tests.bench`` prints them (measure, value, note)."""
    return [
        (f"agent-CLI desk ({cli}): {name}", ours, f"the CLI alone: {floor}; Assay's share: {share}")
        for name, ours, floor, share in found
    ]


def measure(
    *,
    cli: str,
    briefs: int,
    profile: Path | None = None,
    durability: str | None = None,
    split: bool = False,
) -> list[tuple[str, str, str, str]]:
    """The rows for ``cli``; ``split``: also run the desk for one brief, to tell its
    start-up from what each further brief costs."""
    chosen = CLIS[cli]
    root = Path(tempfile.mkdtemp(prefix="assay-bench-clidesk-"))
    try:
        floor = alone(root / "alone", chosen, briefs)
        first = through_assay(root / "first", chosen, 1, durability=durability) if split else None
        ours = through_assay(root / "assay", chosen, briefs, profile=profile, durability=durability)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rows(ours, floor, first)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--briefs", type=int, default=5, help="briefs to run (default 5)")
    parser.add_argument(
        "--cli", choices=[*sorted(CLIS), "all"], default="codex", help="default codex"
    )
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="OUT",
        help="cProfile the desk (every thread, CPU clock) into OUT and print its top",
    )
    parser.add_argument(
        "--durability",
        choices=["step", "window", "exit"],
        help="the desk's durability mode (default: the embedded forge's, step)",
    )
    parser.add_argument(
        "--split",
        action="store_true",
        help="also run one brief: the desk's start-up apart from each further brief",
    )
    options = parser.parse_args(argv)
    if options.briefs < 1:
        parser.error("--briefs must be at least 1")
    for cli in sorted(CLIS) if options.cli == "all" else [options.cli]:
        found = measure(
            cli=cli,
            briefs=options.briefs,
            profile=options.profile,
            durability=options.durability,
            split=options.split,
        )
        load = " ".join(f"{x:.1f}" for x in os.getloadavg())
        mode = options.durability or "step"
        turns = len(CLIS[cli].session())
        print(
            f"agent-CLI desk ({cli}, {options.briefs} briefs, {turns} turns each, "
            f"durability {mode}; "
        )
        print(f"load {load})")
        print()
        print("| measure | through Assay | the CLI alone | Assay's share |")
        print("| --- | ---: | ---: | --- |")
        for name, ours, floor, share in found:
            print(f"| {name} | {ours} | {floor} | {share} |")
        print()
        if options.profile is not None:
            from tests.bench.profiled import top

            print(top(str(options.profile)))


if __name__ == "__main__":
    main()
