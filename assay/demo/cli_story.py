"""``assay demo --cli``: the demo's story told by a real agent CLI instead of the agent desk.

The desk becomes a ``kind: cli`` desk (docs/agent-clis.md): the CLI runs unmodified, and the
desk's gateway journals each model call it makes. No real model is reachable offline, so by
default the calls go on to ``DemoUpstream``, a loopback server in the demo's own process
that answers in the CLI's wire format from the demo's script (``data/desks/scripts``), each
scripted tool call translated into the CLI's own tools: a file write and a command become
its shell tool, ``finish`` becomes Assay's MCP ``finish``. Because the upstream is the
demo's, the kill lands inside a model call for certain: the crash brief's chosen call is
held in the server until its desk has been SIGKILLed, and then closed unanswered, so no
call is answered twice; but the resumed run sends that request again, so the upstream
received it twice, and a provider bills requests: the upstream logs every request it
receives (``model-requests.jsonl``) beside every answer (``model-calls.jsonl``), and the
demo counts both. ``ASSAY_MODEL_BASE_URL`` points the CLI at a real endpoint
instead, as it does for the agent desk.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from assay.agentcli.finish import MARKER
from assay.demo.upstream import Seen, WireFake, toolless_side
from assay.errors import BadInput

KEY_ENV = "ASSAY_DEMO_UPSTREAM_KEY"  # the scripted upstream checks no key; the CLI wants one
KEY_VALUE = "assay-demo-no-secret"
FINAL_TEXT = "The brief is done."
REQUEST_LOG = "model-requests.jsonl"  # every conversation request, beside the answers' log
CLIS_ENV = "ASSAY_AGENT_CLIS"  # where .ci/install put the CLIs, when not the venv's folder


@dataclass(frozen=True)
class CliChoice:
    """How the demo drives one agent CLI: its program, wire API and tool names."""

    profile: str
    program: str
    adapter: str  # the desk's model adapter: the API the CLI speaks
    model: str
    shell: str  # the CLI's own shell tool ("" for aider, which has none)
    mcp: dict[str, str]  # how the CLI names an MCP tool of the ``assay`` server ({}: none)
    prefix: str = ""  # its folder under the agent-clis folder that .ci/install fills
    # The CLI's own file-writing tool, when a file write must not go through its shell (the
    # Gemini CLI refuses a heredoc whose text holds ``$(``, a backtick or ``<(``).
    writer: str = ""
    # Whether file writes go through the shell as base64 (Qwen Code: its shell refuses
    # backticks as the Gemini CLI's does, and its write_file wants absolute paths).
    encoded: bool = False
    bin: str = "node_modules/.bin"  # where the program is in its folder (a venv: "bin")

    def shell_call(self, command: str) -> dict[str, Any]:
        arguments: dict[str, Any] = {"cmd": command}
        if self.shell in ("Bash", "run_shell_command", "bash"):
            arguments = {"command": command, "description": "demo step"}
        if self.profile == "mini-swe-agent":
            arguments = {"command": command}
        return {"name": self.shell, "arguments": arguments}

    def mcp_call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if "namespace" in self.mcp:
            return {"namespace": self.mcp["namespace"], "name": name, "arguments": arguments}
        return {"name": f"{self.mcp['prefix']}{name}", "arguments": arguments}

    def tools(self) -> list[str]:
        """The desk's ``tools``: the CLI's own it uses, and Assay's ``finish`` over MCP."""
        own = [tool for tool in (self.shell, self.writer) if tool]
        return [*own, *(["finish"] if self.mcp else [])]


CLIS = {
    "codex": CliChoice(
        "codex", "codex", "openai", "gpt-5-codex", "exec_command", {"namespace": "mcp__assay"}
    ),
    "claude-code": CliChoice(
        "claude-code",
        "claude",
        "anthropic",
        "claude-sonnet-4-5",
        "Bash",
        {"prefix": "mcp__assay__"},
    ),
    "gemini-cli": CliChoice(
        "gemini-cli",
        "gemini",
        "gemini",
        "gemini-2.5-pro",
        "run_shell_command",
        {"prefix": "mcp_assay_"},
        prefix="gemini-cli",
        writer="write_file",
    ),
    "qwen-code": CliChoice(
        "qwen-code",
        "qwen",
        "openai",
        "qwen3-coder-plus",
        "run_shell_command",
        {"prefix": "mcp__assay__"},
        prefix="qwen-code",
        encoded=True,
    ),
    "opencode": CliChoice(
        "opencode", "opencode", "openai", "gpt-5", "bash", {"prefix": "assay_"}, prefix="opencode"
    ),
    # The two without an MCP client finish in words (assay.agentcli.finish).
    "mini-swe-agent": CliChoice(
        "mini-swe-agent", "mini", "openai", "gpt-5", "bash", {}, prefix="mini-swe-agent", bin="bin"
    ),
    # A model aider has no settings for: it edits in its "whole" format, the one scripted.
    "aider": CliChoice("aider", "aider", "openai", "demo-model", "", {}, prefix="aider", bin="bin"),
}
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"  # how mini-swe-agent ends its session


def choose_cli(name: str) -> tuple[CliChoice, Path]:
    """The CLI named by ``--cli`` and the folder of its program (``BadInput`` naming ``--cli``).

    The program is looked up on ``PATH``, then where ``.ci/install`` puts the CLIs: the
    ``agent-clis`` folder of the interpreter's virtual environment (``$ASSAY_AGENT_CLIS``
    names another).
    """
    choice = CLIS.get(name)
    if choice is None:
        raise BadInput(f"--cli: unknown agent CLI {name!r} (known: {', '.join(sorted(CLIS))})")
    found = shutil.which(choice.program)
    root = Path(os.environ.get(CLIS_ENV) or Path(sys.prefix) / "agent-clis")
    installed = root / choice.prefix / choice.bin / choice.program
    if found is None and installed.is_file() and os.access(installed, os.X_OK):
        found = str(installed)
    if found is None:
        raise BadInput(
            f"--cli {name}: {choice.program!r} is not installed (not on PATH nor in "
            f"{installed.parent}); install it with npm, or run .ci/install"
        )
    return choice, Path(found).parent


def cli_manifest(
    manifest: dict[str, Any], choice: CliChoice, model: dict[str, str], *, sandboxed: bool
) -> dict[str, Any]:
    """The demo's agent desk manifest turned into a ``kind: cli`` desk driving ``choice``."""
    desk = {key: value for key, value in manifest.items() if key not in ("run", "model")}
    desk.update(
        description=f"Adds small functions to textkit, driven by the {choice.profile} CLI.",
        kind="cli",
        cli={"profile": choice.profile},
        model=model,
        tools=choice.tools(),
    )
    if sandboxed:
        desk["sandbox"] = {"toolchains": ["python", "node"]}
    return desk


def scripted_model(choice: CliChoice, url: str) -> dict[str, str]:
    """The desk's model section pointing at the demo's upstream (``url``)."""
    base = f"{url}/v1" if choice.adapter == "openai" else url
    return {
        "adapter": choice.adapter,
        "model": choice.model,
        "base_url": base,
        "api_key_env": KEY_ENV,
    }


def translate(responses: Sequence[dict[str, Any]], choice: CliChoice) -> list[dict[str, Any]]:
    """The demo script's turns for one brief, in ``choice``'s tools, plus a closing turn.

    A CLI asks the model once more after its last tool result; that call is the closing
    text turn, and it ends the CLI's session. mini-swe-agent ends when the model submits
    (its ``finish``, with the claim in words); aider gets one answer that writes every file
    and says the claim (it runs no commands: the gate runs the rows).
    """
    if choice.profile == "aider":
        return [_aider_answer(responses)]
    turns = []
    for response in responses:
        calls = [_call(call, choice) for call in response.get("tool_calls") or []]
        turns.append({"content": response.get("content"), "tool_calls": calls})
    if not choice.mcp:  # submitted: the session is over
        return turns
    return [*turns, {"content": FINAL_TEXT}]


def _aider_answer(responses: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One answer in aider's ``whole`` edit format: each file's path, then all of it."""
    parts = []
    for response in responses:
        if response.get("content"):
            parts.append(str(response["content"]))
        for call in response.get("tool_calls") or []:
            arguments = call.get("arguments") or {}
            if call["name"] == "write_file":
                content = str(arguments["content"])
                content += "" if content.endswith("\n") else "\n"
                parts.append(f"{arguments['path']}\n```\n{content}```")
            elif call["name"] == "finish":
                parts.append(f"{MARKER} {json.dumps(arguments)}")
    return {"content": "\n\n".join(parts) + "\n"}


def _call(call: dict[str, Any], choice: CliChoice) -> dict[str, Any]:
    name, arguments = call["name"], dict(call.get("arguments") or {})
    if name == "write_file" and choice.writer:
        content = str(arguments["content"])
        return {
            "name": choice.writer,
            "arguments": {"file_path": str(arguments["path"]), "content": content},
        }
    if name == "write_file" and choice.encoded:
        path, data = str(arguments["path"]), str(arguments["content"]).encode()
        folder, quoted = shlex.quote(str(PurePosixPath(path).parent)), shlex.quote(path)
        encoded = base64.b64encode(data).decode()
        return choice.shell_call(f"mkdir -p {folder} && echo {encoded} | base64 -d > {quoted}")
    if name == "write_file":
        path = str(arguments["path"])
        folder = str(PurePosixPath(path).parent)
        quoted = shlex.quote(path)
        content = str(arguments["content"])
        content += "" if content.endswith("\n") else "\n"  # the heredoc's end on its own line
        command = f"mkdir -p {shlex.quote(folder)} && cat > {quoted} <<'ASSAY_DEMO_EOF'\n"
        return choice.shell_call(command + content + "ASSAY_DEMO_EOF")
    if name == "run":
        return choice.shell_call(str(arguments["command"]))
    if name == "finish" and not choice.mcp:  # mini-swe-agent submits, the claim in words
        claim = shlex.quote(f"{MARKER} {json.dumps(arguments)}")
        return choice.shell_call(f"{SUBMIT} && echo {claim}")
    return choice.mcp_call(name, arguments)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def conversation_brief(body: dict[str, Any]) -> str | None:
    """The brief a request's conversation is about: the first ``# Brief <id>:`` heading,
    wherever a CLI put the prompt (mini-swe-agent after "Please solve this issue: ",
    OpenCode in quotes)."""
    conversation = body.get("messages") or body.get("input") or body.get("contents") or []
    for text in _strings(conversation):
        found = BRIEF_HEADING.search(text)
        if found is not None:
            return found.group(1)
    return None


BRIEF_HEADING = re.compile(r"(?:^|[\s\"'])# Brief ([A-Za-z0-9_.-]+):")


class DemoUpstream(WireFake):
    """The demo's scripted upstream: turns by brief, a held crash call, a call log."""

    def __init__(self, script: str, choice: CliChoice, call_log: Path) -> None:
        data = yaml.safe_load(script)
        self.scripts = {
            brief: translate(entry["responses"], choice) for brief, entry in data["briefs"].items()
        }
        if choice.profile == "aider":  # no tools: every call a turn, counted by its answers
            super().__init__([], by="replies", is_side=toolless_side)
        else:
            super().__init__([])
        self.call_log = call_log
        self.request_log = call_log.with_name(REQUEST_LOG)
        self.crash_at: tuple[str, int] | None = None
        self.crash_held = False
        self.crash_let_go = False

    def arm_crash(self, brief: str, turn: int) -> int:
        """Hold the call for ``brief``'s turn ``turn`` (0-based; its last one when it has
        fewer: aider's one answer) until ``let_go``; the turn armed."""
        turn = max(0, min(turn, len(self.scripts.get(brief, [])) - 1))
        with self._lock:
            self.crash_at = (brief, turn)
        return turn

    def let_go(self) -> None:
        """Close the held crash call unanswered (its desk is dead: nothing was paid)."""
        with self._lock:
            self.crash_let_go = True
            self._lock.notify_all()

    def stop(self) -> None:
        self.let_go()
        super().stop()

    def _is_crash(self, seen: Seen) -> bool:
        return (conversation_brief(seen.body), seen.turn) == self.crash_at

    def script_for(self, seen: Seen) -> Sequence[dict[str, Any]]:
        return self.scripts.get(conversation_brief(seen.body) or "", [])

    def held(self, seen: Seen) -> bool:
        if self.crash_let_go or not self._is_crash(seen):
            return False
        self.crash_held = True  # what the stage waits for before it kills the desk
        return True

    def dropped(self, seen: Seen) -> bool:
        if not self._is_crash(seen) or not self.crash_held:
            return False
        self.crash_at = None  # once: the resumed run's call is answered
        return True

    def on_request(self, seen: Seen) -> None:
        self._log(self.request_log, seen)

    def on_answer(self, seen: Seen) -> None:
        self._log(self.call_log, seen)

    def on_side(self, seen: Seen) -> None:
        # A side request (OpenCode's title) is a journaled model call the provider bills.
        self._log(self.call_log, seen, turn=f"side: {seen.side}")

    def _log(self, path: Path, seen: Seen, *, turn: int | str | None = None) -> None:
        turn = seen.turn if turn is None else turn
        line = {"brief": conversation_brief(seen.body), "turn": turn, "pid": os.getpid()}
        with open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps(line) + "\n")
