"""The ``cli`` desk kind: an unmodified agent CLI run against the model gateway.

One run: record the work tree's base commit (``compute:cli.base``), start the gateway with
the desk's MCP tools mounted, launch the CLI through its profile (fresh, or resuming its
own session from the checkpoint's session state: ``cli_resume``), and serve what it sends
on this thread, the run's: model calls go through a ``CallHandler`` (journaled, replayed,
forwarded, refused), MCP tool calls become ``WireSession`` tool steps (``finish`` records
the claim, ``request_approval`` waits for approval, ``check_messages`` drains steering).
When the CLI exits, ``compute:cli.exit`` records how, the desk's own approval gate runs if
it has one, and ``evidence.claimed`` records what the agent said it checked. A CLI that
asks for something that stops the run (budget, approval, an undeclared tool, divergence)
is killed first: a suspended run holds no process. ``launch_cli`` is the one place a CLI
process is started.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import os
import queue
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assay.agentcli.finish import WORDS_HINT, claim_in
from assay.desks.kinds.agent import brief_prompt, claimed_rows
from assay.desks.kinds.cli_resume import SessionKeeper, Start
from assay.desks.kinds.tools import ToolBox
from assay.errors import (
    AssayError,
    BadInput,
    Denied,
    Failed,
    Suspended,
    Suspension,
    Unavailable,
)
from assay.gateway.calls import CallHandler, tool_allowed
from assay.gateway.server import Gateway, ModelCall
from assay.gateway.upstream import Upstream
from assay.gateway.volatile import Mask
from assay.journal.redact import REDACTED
from assay.plumbing import restore_files
from assay.runtime.wire import WireSession
from assay.sandbox import GatewayEndpoint, SandboxSpec, start_sandboxed
from assay.sandbox.bwrap import HOME as SANDBOX_HOME
from assay.sandbox.process import SandboxProcess

OUTPUT_TAIL = 4_000
CAPACITY = "model capacity"  # what a run waits for when its upstream has no room for a call
FINISH_HINT = (
    "\n\nWhen the brief is done, call the `finish` tool of the `assay` MCP server with a short "
    "`summary` and, for each verify row, an `evidence` item {row, result: pass|fail, note}."
)


def cli_profile(desk: Any) -> Any:
    """The desk's profile (``BadInput`` naming the desk file and ``cli.profile``), without
    its native resume when the desk's ``cli.resume`` says ``relaunch``."""
    from assay.agentcli.profiles import get_profile

    try:
        profile = get_profile(desk.cli.profile)
    except BadInput as exc:
        raise BadInput(f"{desk.source}: {exc.message}") from None
    if getattr(desk.cli, "resume", None) == "relaunch":
        return dataclasses.replace(profile, resume=None)
    return profile


def output_masks(desk: Any) -> tuple[Mask, ...]:
    """The volatile parts of the CLI's tool output: its profile's and the desk's own
    ``cli.volatile_output`` (``BadInput`` naming the desk file and the pattern)."""
    try:
        masks: tuple[Mask, ...] = cli_profile(desk).output_masks(desk.cli.volatile_output)
        return masks
    except BadInput as exc:
        raise BadInput(f"{desk.source}: {exc.message}") from None


def check_installed(desk: Any) -> None:
    """``BadInput`` naming the field when the CLI's program is not on PATH (before any run)."""
    profile = cli_profile(desk)
    command = list(desk.cli.command or profile.default_command)
    where = "cli.command" if desk.cli.command else f"cli.profile ({profile.name}'s default command)"
    if not command:
        raise BadInput(f"{desk.source}: cli.command: the {profile.name} profile needs a command")
    if shutil.which(command[0]) is None:
        how = (
            f"install it with `{profile.install}`"
            if profile.install and not desk.cli.command
            else "install it"
        )
        raise BadInput(
            f"{desk.source}: {where}: the {profile.name} CLI {command[0]!r} is not installed "
            f"(not on PATH): {how}, put it on the desk process's PATH, or give its full path "
            f"as the first element of cli.command"
        )


# ------------------------------------------------------------------------- the process


def launch_cli(
    launch: Any,
    *,
    cwd: Path,
    home: Path,
    spec: SandboxSpec | None = None,
    gateway: GatewayEndpoint | None = None,
) -> CliProcess:
    """Start ``launch.argv`` in ``cwd`` with an environment built from scratch: the
    profile's variables plus PATH, HOME and LANG, never the desk's own (its keys).

    With a ``spec`` whose isolation is on, in the sandbox (``assay.sandbox``): its HOME
    (``home`` must be the sandbox's) is a private tmpfs, so the profile's files are written
    there by a bootstrap that then execs the CLI; the network is the gateway's relay only.
    """
    _check_files(launch, home)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        **launch.env,
    }
    if spec is not None and spec.isolation == "on":
        return _launch_sandboxed(launch, cwd=cwd, env=env, spec=spec, gateway=gateway)
    for path, data in (launch.files or {}).items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(data)
    # The runner's warden (assay.sandbox.warden) kills the CLI and every tool it started,
    # however detached, when the desk dies, SIGKILL included.
    return _start(list(launch.argv), cwd=cwd, env=env, spec=spec or SandboxSpec(isolation="off"))


def _check_files(launch: Any, home: Path) -> None:
    for path in launch.files or {}:
        if home.resolve() not in Path(path).resolve().parents:
            raise BadInput(f"a profile wrote {path} outside the CLI's home")


# Inside the sandbox: write the profile's files (JSON in $ASSAY_CLI_FILES, never on a
# command line: an MCP config holds the token), then become the CLI.
BOOTSTRAP = """import base64, json, os, sys
for path, data in json.loads(os.environ.pop("ASSAY_CLI_FILES")).items():
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(base64.b64decode(data))
os.execvp(sys.argv[1], sys.argv[1:])
"""


def _launch_sandboxed(
    launch: Any,
    *,
    cwd: Path,
    env: dict[str, str],
    spec: SandboxSpec,
    gateway: GatewayEndpoint | None,
) -> CliProcess:
    files = {str(p): base64.b64encode(d).decode() for p, d in (launch.files or {}).items()}
    env["ASSAY_CLI_FILES"] = json.dumps(files)
    program = shutil.which(launch.argv[0], path=env["PATH"]) or launch.argv[0]
    spec = spec.with_read_only(*_program_roots(Path(program)))
    argv = [sys.executable, "-c", BOOTSTRAP, *launch.argv]
    return _start(argv, cwd=cwd, env=env, spec=spec, gateway=gateway)


def _start(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    spec: SandboxSpec,
    gateway: GatewayEndpoint | None = None,
) -> CliProcess:
    """The one runner starts the CLI, sandboxed or not: its own process group, killed as
    a group, the tail of its output kept."""
    process = start_sandboxed(
        argv,
        cwd=cwd,
        env=env,
        spec=spec,
        timeout_s=None,
        max_output_bytes=2 * OUTPUT_TAIL,
        gateway=gateway,
    )
    return CliProcess(process)


def _program_roots(program: Path) -> list[Path]:
    """What a CLI's program needs to be visible: its ``node_modules`` (an npm CLI runs
    files, and native binaries, of other packages there), its virtual environment (a
    PyPI CLI), else its own directory."""
    real = program.resolve()
    for parent in real.parents:
        if parent.name == "node_modules":
            return [parent, program.parent]
    venv = program.parent.parent
    if (venv / "pyvenv.cfg").is_file():
        return [venv, *_interpreter_roots(venv)]
    return [real.parent, program.parent]


def _interpreter_roots(venv: Path) -> list[Path]:
    """The base interpreter's prefix a virtual environment points at (``home =``)."""
    for line in (venv / "pyvenv.cfg").read_text(encoding="utf-8", errors="replace").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            return [Path(value.strip()).resolve().parent]
    return []


class CliProcess:
    """A launched CLI (``start_sandboxed``): killed with everything it started."""

    def __init__(self, process: SandboxProcess) -> None:
        self.process = process

    def poll(self) -> int | None:
        return self.process.poll()

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()

    def tail(self) -> str:
        result = self.process.result()
        return str((result.head + result.tail).decode("utf-8", "replace"))[-OUTPUT_TAIL:]


@contextlib.contextmanager
def cli_home(worktree: Path) -> Iterator[Path]:
    """A fresh HOME for the CLI beside the work tree (never inside it: not committed),
    the desk's own folder: sandboxed, it is mounted as the sandbox's HOME, so the CLI's
    session files outlive the CLI for the desk to record (``cli_resume``).

    Its path is the same for every process that works on the brief here, because CLIs
    write it into their prompts (Claude Code names its project folder), and a resumed
    CLI must send what the crashed one sent."""
    home = worktree.parent / f".{worktree.name}.cli-home"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(mode=0o700, parents=True)
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def restore_tree(worktree: Path, commit: str) -> None:
    """Make the files (not the journal) what they were at ``commit``."""
    restore_files(worktree, commit, keep=".assay")


# ------------------------------------------------------------------------ MCP tools


@dataclass
class ToolCall:
    """One MCP tool call waiting for the run thread's answer."""

    name: str
    arguments: dict[str, Any]
    done: threading.Event = field(default_factory=threading.Event)
    result: dict[str, Any] | None = None
    error: AssayError | None = None

    def answer(self, result: dict[str, Any]) -> None:
        self.result = result
        self.done.set()

    def fail(self, error: AssayError) -> None:
        self.error = error
        self.done.set()


class RunBridge:
    """The MCP ``ToolBridge`` of a run: each call is handed to the run thread."""

    def __init__(self, calls: queue.Queue[Any], descriptors: list[dict[str, Any]]) -> None:
        self.calls = calls
        self.descriptors = descriptors

    def list_tools(self) -> list[dict[str, Any]]:
        return list(self.descriptors)

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        call = ToolCall(name, dict(arguments))
        self.calls.put(call)
        call.done.wait()
        if call.error is not None:
            raise call.error
        return call.result or {}


# ---------------------------------------------------------------------- the desk kind


@dataclass
class CliOutcome:
    exit: int
    output: str
    finish: dict[str, Any] | None = None


class CliRun:
    """One CLI session on one run (see the module docstring)."""

    def __init__(
        self,
        run: Any,
        desk: Any,
        *,
        worktree: Path,
        secrets: list[str],
        head: Callable[[], str],
    ) -> None:
        self.run = run
        self.desk = desk
        self.worktree = worktree
        self.profile = cli_profile(desk)
        self.toolbox = ToolBox(worktree, desk.tool_policy(), withheld=secrets)
        self.secrets = secrets
        self.head = head
        self.finish: dict[str, Any] | None = None

    def descriptors(self) -> list[dict[str, Any]]:
        from assay.gateway.mcp import desk_tool_descriptors

        return desk_tool_descriptors(self.toolbox, approval=True, steering=True)

    def gateway(self, descriptors: list[dict[str, Any]]) -> Gateway:
        """A gateway for this session, with the desk's MCP tools when the CLI takes them."""
        gateway = Gateway(on_unrouted=self.log)
        if self.profile.mcp:
            from assay.gateway.mcp import build_mcp_app

            bridge = RunBridge(gateway.calls, descriptors)
            gateway.mcp_app = build_mcp_app(bridge, token=gateway.token)
        return gateway

    def log(self, message: str) -> None:
        """A note on the desk's stderr as it happens, naming the desk (a request the
        gateway has no route for, a session state that is not used)."""
        from assay.console import err, printable

        err.print(f"{self.desk.source}: {printable(message)}", markup=False, highlight=False)

    def session(self, brief: Any, *, base: str) -> CliOutcome:
        """Run the CLI to its exit (``base``: the commit of ``cli.base``), resumed natively
        from the checkpoint's session state when it holds one (``cli_resume``); a CLI that
        exits before any model call when resumed so (its session unreadable to it) is
        relaunched from the start instead."""
        keeper = SessionKeeper(
            self.run,
            self.profile,
            tree=self.worktree,
            brief=brief.id,
            head=self.head,
            withheld=list(self.secrets),
            warn=self.log,
        )
        start = keeper.start(base)
        if start.method == "ended":  # nothing to launch: cli.exit replays what it recorded
            WireSession(self.run, difference=lambda rec, req: "", resume_at=start.resume_at).close()
            return CliOutcome(0, "")
        at = self.run.pos
        if start.method == "native":
            outcome = self.launched(brief, keeper, start)
            if outcome is not None:
                return outcome
            self.log("the CLI could not resume its session: relaunching it from the start")
            self.run.pos = at
            keeper.point = None
            start = Start("relaunch", base)
        outcome = self.launched(brief, keeper, start)
        assert outcome is not None
        return outcome

    def launched(self, brief: Any, keeper: SessionKeeper, start: Start) -> CliOutcome | None:
        """One launch of the CLI as ``start`` says; None when a native resume failed before
        the CLI made any call (the caller relaunches it from the start)."""
        restore_tree(self.worktree, start.commit)
        descriptors = self.descriptors()
        offered = [d["name"] for d in descriptors]
        gateway = self.gateway(descriptors)
        keeper.withheld.append(gateway.token)
        native = start.method == "native"
        upstream = Upstream(self.desk.model, source=self.desk.source)
        handler: CallHandler
        wire = WireSession(
            self.run,
            difference=lambda rec, req: handler.difference(rec, req),
            resume_at=start.resume_at,
            on_turn=keeper.capture_turn if self.profile.resume is not None else None,
        )
        handler = CallHandler(
            wire,
            upstream,
            price=self.desk.model.price,
            allowed=lambda name: tool_allowed(name, self.desk.tools, offered),
            normalise_extra=self.profile.normalise,
            masks=output_masks(self.desk),
            toolless_turns=self.profile.toolless_turns,
            rewrite=self.profile.resumed_request if native else None,
        )
        if native:
            handler.seen_tools.update(keeper.seen_tool_ids())
        wire.settle_waits(CAPACITY)  # the relaunched CLI will not ask for the desk's waits
        try:
            with gateway, cli_home(self.worktree) as outside:
                keeper.restore_home(start, outside)
                process = self.launch(
                    brief, gateway, outside, session=keeper.session, resumed=native
                )
                try:
                    code = self.serve(process, gateway, handler, wire)
                finally:
                    process.kill()
                    _refuse_waiting(gateway.calls)
                # The run's token is dead once the gateway stops; still, never record it.
                output = process.tail().replace(gateway.token, REDACTED)
        except Unavailable as down:
            if not down.details.get("capacity"):
                raise
            self.wait_for_capacity(wire)  # the CLI is gone; the run waits holding nothing
            raise
        finally:
            upstream.close()
        if native and handler.calls == 0 and not gateway.unrouted:
            return None  # it never got to the turn its session leads to
        if handler.calls == 0 and code != 0:
            if gateway.unrouted:  # what the CLI asked for names the fix; its output may not
                raise BadInput(
                    f"{self.desk.source}: cli.api: the agent CLI exited {code} before calling "
                    f"its model: {gateway.unrouted[0]}"
                )
            raise BadInput(
                f"{self.desk.source}: cli.command: the agent CLI exited {code} before calling "
                f"its model: {output.strip()[-300:]}"
            )
        wire.close()
        if self.finish is None and not self.profile.mcp:  # said in words (agentcli.finish)
            self.finish = claim_in(handler.last_said())
        return CliOutcome(code, output, self.finish)

    def wait_for_capacity(self, wire: WireSession) -> None:
        """The upstream still had no capacity after its retries: a durable wait (exit 75,
        ``waiting_for: model capacity``) of ``model.capacity_wait_s``, doubled for each
        earlier such wait in the run, up to an hour. When it has passed, a wake (``assay
        wake``, the next ``desk run``) resumes the run: the CLI is relaunched, its calls
        replay, and the one that was refused goes upstream again."""
        earlier = wire.recorded_waits(CAPACITY)
        seconds = min(float(self.desk.model.capacity_wait_s) * 2 ** min(earlier, 16), 3600.0)
        wire.wait_for(CAPACITY, timeout=seconds)

    def launch(
        self, brief: Any, gateway: Gateway, outside: Path, *, session: str, resumed: bool
    ) -> CliProcess:
        """Start the CLI through its profile, in the desk's sandbox unless it is off
        (``resumed``: on its session ``session``, restored in ``outside``)."""
        spec = self.desk.sandbox_spec()
        sandboxed = spec.isolation == "on"
        # In the sandbox HOME is /tmp/home, the desk's folder ``outside`` mounted there (the
        # session files the desk records outlive the CLI); the relay there listens on the
        # gateway's own port, so the CLI uses the same URL inside and out.
        home = Path(SANDBOX_HOME) if sandboxed else outside
        launch = self.profile.launch(
            command=self.desk.cli.command,
            workdir=self.worktree,
            home=home,
            gateway_url=gateway.url,
            token=gateway.token,
            model=self.desk.model.model,
            prompt=brief_prompt(brief) + (FINISH_HINT if self.profile.mcp else WORDS_HINT),
            tools=list(self.desk.tools),
            mcp_url=gateway.mcp_url,
            env=self.desk.cli.env,
            files=self.desk.cli.files,
            session=session,
            resumed=resumed,
        )
        return launch_cli(
            launch,
            cwd=self.worktree,
            home=home,
            spec=spec.with_home(outside) if sandboxed else None,
            gateway=GatewayEndpoint(gateway.socket_path, gateway.port),
        )

    def serve(
        self,
        process: CliProcess,
        gateway: Gateway,
        handler: CallHandler,
        wire: WireSession,
    ) -> int:
        deadline = time.monotonic() + float(self.desk.cli.timeout_s)
        while True:
            try:
                item = gateway.calls.get(timeout=0.05)
            except queue.Empty:
                code = process.poll()
                if code is not None and gateway.calls.empty():
                    return code
                if time.monotonic() > deadline:
                    raise Failed(
                        f"{self.desk.source}: cli.timeout_s: the agent CLI ran past "
                        f"{self.desk.cli.timeout_s:g} s and was stopped"
                    ) from None
                continue
            if isinstance(item, ModelCall):
                handler.handle(item)
            else:
                self.tool(item, wire)

    def tool(self, call: ToolCall, wire: WireSession) -> None:
        from assay.gateway.mcp import check_arguments

        name, args = call.name, call.arguments
        try:
            descriptor = next((d for d in self.descriptors() if d["name"] == name), None)
            if descriptor is None:
                raise Denied(f"tool {name!r} is not declared by this desk", tool=name)
            check_arguments(descriptor, args)
            if name == "request_approval":
                event = wire.wait_for("approval")
                kind = getattr(event, "kind", "approve")
                result = {
                    "approved": kind == "approve",
                    "by": getattr(event, "actor", ""),
                    "text": getattr(event, "text", ""),
                }
            elif name == "check_messages":
                events = wire.signals()
                result = {"messages": [e.text for e in events if e.kind == "signal"]}
            else:
                result = wire.tool(name, args)
                if name == "finish":
                    self.finish = {**args, **(result if isinstance(result, dict) else {})}
        except Suspension as waiting:
            call.fail(Suspended(f"the run is waiting for {waiting.waiting_for}"))
            raise
        except Denied as denied:
            call.fail(denied)
            raise
        except (BadInput, Failed) as problem:  # back to the agent, as agent desks do
            call.fail(problem)
            return
        except AssayError as error:
            call.fail(error)
            raise
        call.answer(result if isinstance(result, dict) else {"result": result})


def _refuse_waiting(calls: queue.Queue[Any]) -> None:
    """Answer whatever the CLI still waits on (the run stopped; the CLI is gone)."""
    while True:
        try:
            item = calls.get_nowait()
        except queue.Empty:
            return
        if isinstance(item, ModelCall):
            item.refuse(503, "overloaded_error", "assay: the run stopped")
        else:
            item.fail(Suspended("the run stopped"))


def cli_desk(
    desk: Any,
    *,
    worktree: Path,
    head: Callable[[], str],
    secrets: list[str],
    approval: bool,
    fingerprint: Callable[[], dict[str, str]],
) -> Callable[[Any, Any], dict[str, Any]]:
    """The desk function of a ``cli`` desk (``head``: the work tree's commit now)."""

    def function(run: Any, brief: Any) -> dict[str, Any]:
        base = run.step("cli.base", lambda: {"commit": head()})
        cli = CliRun(run, desk, worktree=worktree, secrets=secrets, head=head)
        outcome = cli.session(brief, base=str(base["commit"]))
        ended = run.step(
            "cli.exit",
            lambda: {
                "exit": outcome.exit,
                "output": outcome.output[-OUTPUT_TAIL:],
                "finish": outcome.finish,
            },
        )
        finish = ended.get("finish") or {}
        if approval and ended["exit"] == 0:
            event = run.wait_for("approval")
            if getattr(event, "kind", "approve") == "reject":
                return {
                    "status": "failed",
                    "summary": "rejected: " + str(event.text),
                    "evidence": [],
                }
        rows = claimed_rows(brief, finish.get("evidence"))
        run.step(
            "evidence.claimed",
            lambda: {"rows": rows, "env_fingerprint": fingerprint()},
            kind="compute",
        )
        summary = str(finish.get("summary") or ended["output"].strip()[-500:])
        status = "done" if ended["exit"] == 0 else "failed"
        return {"status": status, "summary": summary, "evidence": rows, "exit": ended["exit"]}

    return function
