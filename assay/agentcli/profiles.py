"""The agent CLI profiles: how each CLI is pointed at the model gateway, run unattended in a
brief's work tree and handed its prompt, and which request fields are volatile.

    profile = get_profile("claude-code")
    launch = profile.launch(command=None, workdir=tree, home=home, gateway_url=url,
                            token=token, model="claude-sonnet-4-5", prompt=brief_text,
                            tools=["Bash", "Read", "Write"], mcp_url=None)
    # write launch.files, then run launch.argv in `tree` with launch.env + PATH/HOME/LANG,
    # stdin from /dev/null

``gateway_url`` is the gateway's root (``http://127.0.0.1:PORT``, no ``/v1``): a profile adds
the path prefix its API client expects. Hostile by default: the prompt is one argv element
(``{prompt}`` is replaced inside the element that holds it, never through a shell), every
command a profile builds puts it where the CLI cannot take it for an option, and the token
is the only key a CLI is given. ``normalise(api, body)`` returns a copy of a request body
without the fields that change between two runs of the same conversation (ids, timestamps,
Claude Code's attribution header...), so the gateway can match a resumed CLI's requests
against the journal; ``volatile_output`` lists what changes from run to run in the output of
the CLI's tools (run times, session ids, temporary paths), which the gateway masks in tool
results only (``output_masks``, ``assay.gateway.volatile``). ``resume`` says how a killed
run goes on: the CLI's own resume from its session state (``NativeResume``,
``assay.agentcli.resume``), or relaunch and replay. What each CLI sends is written down in
docs/agent-cli-profiles.md.
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Any, ClassVar

from assay.agentcli.resume import RESUME_PROMPT, NativeResume, without_resume
from assay.errors import BadInput
from assay.gateway.apis import ApiName, get_api
from assay.gateway.volatile import RUNNER_TIMES, TEMP_PATHS, Mask, mask_text, masks

Api = ApiName  # the wire API a CLI speaks: one of assay.gateway.apis.API_NAMES
PROMPT = "{prompt}"
MCP_NAME = "assay"  # the name the Assay MCP server is registered under in every CLI


@dataclass(frozen=True)
class Launch:
    """What the desk starts: ``argv`` in the work tree, with ``env`` (plus PATH, HOME and
    LANG), after writing ``files`` (absolute paths under ``home``; their parents may not
    exist yet)."""

    argv: list[str]
    env: dict[str, str]
    files: dict[Path, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class CliProfile:
    """One agent CLI. Subclasses say how it is configured; this base substitutes the prompt,
    checks the command and does the normalisation every API shares."""

    name: str
    api: Api
    default_command: tuple[str, ...]
    mcp: bool = True  # whether the CLI can register an MCP server over streamable HTTP
    install: str = ""  # how its program is installed, for the error when it is missing
    # How a killed run goes on: the CLI's own resume from its session state (a
    # ``NativeResume``), or None: relaunched from the start, its calls replayed.
    resume: NativeResume | None = None

    @property
    def resume_method(self) -> str:
        """``native`` (the CLI resumes its own session) or ``relaunch`` (relaunched from the
        start, its requests answered from the journal)."""
        return "native" if self.resume is not None else "relaunch"

    def launch(
        self,
        *,
        command: Sequence[str] | None,
        workdir: Path,
        home: Path,
        gateway_url: str,
        token: str,
        model: str,
        prompt: str,
        tools: Sequence[str],
        mcp_url: str | None,
        env: Mapping[str, str] | None = None,
        files: Mapping[str, str] | None = None,
        session: str = "",
        resumed: bool = False,
    ) -> Launch:
        """How to start the CLI: the profile's command, variables and config files, then the
        desk's own ``cli.env`` and ``cli.files`` over them, each with its placeholders
        filled (``fill_placeholders``; the token never on the command line).

        ``resumed``: the CLI resumes its session ``session`` (its files already restored
        in ``home``): its resume arguments go before the prompt, which is
        ``RESUME_PROMPT``; otherwise a CLI that lets the desk name its session is given
        ``session`` as its name."""
        base = list(command) if command else list(self.default_command)
        if not base or not all(isinstance(arg, str) for arg in base):
            raise BadInput(
                f"cli.command: the {self.name} profile needs a command (a list of strings)"
            )
        if resumed and self.resume is None:
            raise BadInput(f"cli.profile: the {self.name} CLI cannot resume its own session")
        url = gateway_url.rstrip("/")
        values = {
            "prompt": RESUME_PROMPT if resumed else prompt,
            "gateway_url": url,
            "mcp_url": mcp_url or "",
            "home": str(home),
            "workdir": str(workdir),
            "model": model,
        }
        for index, arg in enumerate(base):
            check_command_arg(arg, where=f"cli.command[{index}]")
        if not command:  # a desk's own command opts back in to what the profile keeps out
            self.check_work_tree(workdir)
        if self.resume is not None:  # placed by where "{prompt}" is, so before it is filled
            base = self.resume.arguments(base, session=session, resumed=resumed)
        # The placeholders go into the command before the profile adds its options, so a
        # "{prompt}" in a model name or a path is never replaced.
        base = [fill_placeholders(arg, values) for arg in base]
        argv = self.arguments(base, home=home, model=model, tools=tools, mcp_url=mcp_url)
        environ = self.environment(url=url, home=home, token=token, workdir=workdir)
        if resumed and self.resume is not None:
            environ.update(self.resume.environment())
        written = self.config_files(
            url=url, home=home, token=token, model=model, mcp_url=mcp_url, tools=tools
        )
        secret = {**values, "token": token}
        environ.update({name: fill_placeholders(v, secret) for name, v in (env or {}).items()})
        for relative, text in (files or {}).items():
            written[home / check_home_path(relative)] = fill_placeholders(text, secret).encode()
        return Launch(argv=argv, env=environ, files=written)

    # -- what each profile says ---------------------------------------------------------

    def check_work_tree(self, workdir: Path) -> None:
        """``BadInput`` when the work tree holds a file that would configure the CLI past
        what the profile grants (its own default command only)."""

    def arguments(
        self, base: list[str], *, home: Path, model: str, tools: Sequence[str], mcp_url: str | None
    ) -> list[str]:
        """The command with the profile's own options added (the prompt not yet in)."""
        return base

    def environment(self, *, url: str, home: Path, token: str, workdir: Path) -> dict[str, str]:
        raise NotImplementedError

    def config_files(
        self,
        *,
        url: str,
        home: Path,
        token: str,
        model: str,
        mcp_url: str | None,
        tools: Sequence[str] = (),
    ) -> dict[Path, bytes]:
        return {}

    # -- replay matching ------------------------------------------------------------------

    volatile_top: ClassVar[frozenset[str]] = frozenset({"metadata", "user"})
    # What the CLI's own tools print that changes between two runs of the same step, as
    # patterns (a pattern's groups, when it has any, are what is masked). Test runners'
    # run times hold for every CLI and are masked by the gateway itself.
    volatile_output: ClassVar[tuple[str, ...]] = ()
    # Whether a call without tools is still a conversation turn (a CLI that never sends
    # tools: aider), rather than a side request (a title, a token count) a resume may skip.
    toolless_turns: ClassVar[bool] = False

    def output_masks(
        self, extra: Sequence[str] = (), *, where: str = "cli.volatile_output"
    ) -> tuple[Mask, ...]:
        """The masks the gateway applies to this CLI's tool results: the profile's own, the
        usual temporary paths, and ``extra`` (a desk's ``cli.volatile_output``, ``BadInput``
        naming ``where[i]`` for a pattern that is not one)."""
        own = masks(self.volatile_output, where=f"{self.name} profile volatile_output")
        return own + TEMP_PATHS + masks(extra, where=where)

    def normalise(self, api: str, body: dict[str, Any]) -> dict[str, Any]:
        """A copy of ``body`` without its volatile fields (see the module docstring)."""
        out = {k: copy.deepcopy(v) for k, v in body.items() if k not in self.volatile_top}
        return self.scrub(api, out)

    def scrub(self, api: str, body: dict[str, Any]) -> dict[str, Any]:
        return body

    # -- native resume --------------------------------------------------------------------

    def resumed_request(self, api: str, body: dict[str, Any]) -> dict[str, Any]:
        """A request of a natively resumed session as the CLI would have sent it had it
        never stopped: what it added because it resumed taken out (``without_resume``)."""
        wire = get_api(api)
        items, rest = wire.split(body)
        fillers = self.resume.fillers if self.resume is not None else ()
        kept = without_resume(items, fillers=fillers, markers=wire.markers)
        return wire.join(self.repair_resumed(kept), rest)

    def repair_resumed(self, items: list[Any]) -> list[Any]:
        """What else a resumed CLI rebuilds differently in its conversation (none here)."""
        return items


def _options_before_prompt(base: list[str], options: list[str]) -> list[str]:
    """Insert ``options`` right after the program name, so they stay options whatever the
    user's command has after it (a ``--`` or the prompt itself)."""
    return [base[0], *options, *base[1:]]


DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")


class ClaudeCodeProfile(CliProfile):
    """Claude Code (``@anthropic-ai/claude-code``) in print mode against ``/v1/messages``.

    As root it refuses ``--dangerously-skip-permissions``, so the desk's declared tools are
    both the only built-in tools offered (``--tools``) and the ones granted
    (``--allowedTools``); the Assay MCP server's tools are granted as ``mcp__assay``.
    ``--setting-sources=user`` keeps a work tree's ``.claude/settings.json`` (hooks that run
    commands outside the declared tools, permissions) and its ``CLAUDE.md`` out: only the
    generated HOME's settings apply. A desk's own ``command`` can opt back in."""

    volatile_top = frozenset({"metadata"})  # user_id: device id + session id

    def arguments(
        self, base: list[str], *, home: Path, model: str, tools: Sequence[str], mcp_url: str | None
    ) -> list[str]:
        for tool in tools:  # the lists are comma-joined: a comma would grant a second tool
            if "," in tool or not tool.strip():
                raise BadInput(f"tools: {tool!r} is not a Claude Code tool name")
        builtin = [t for t in tools if not t.startswith("mcp__")]
        allowed = list(tools) + ([f"mcp__{MCP_NAME}"] if mcp_url else [])
        options = [
            f"--model={model}",
            f"--tools={','.join(builtin)}",
            f"--allowedTools={','.join(allowed)}",
            "--setting-sources=user",
        ]
        if mcp_url:
            options += [f"--mcp-config={home / '.assay-mcp.json'}", "--strict-mcp-config"]
        return _options_before_prompt(base, options)

    def environment(self, *, url: str, home: Path, token: str, workdir: Path) -> dict[str, str]:
        return {
            "ANTHROPIC_BASE_URL": url,
            "ANTHROPIC_API_KEY": token,
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        }

    def config_files(
        self,
        *,
        url: str,
        home: Path,
        token: str,
        model: str,
        mcp_url: str | None,
        tools: Sequence[str] = (),
    ) -> dict[Path, bytes]:
        if not mcp_url:
            return {}
        server = {"type": "http", "url": mcp_url, "headers": {"Authorization": f"Bearer {token}"}}
        text = json.dumps({"mcpServers": {MCP_NAME: server}}, indent=2) + "\n"
        return {home / ".assay-mcp.json": text.encode()}

    def scrub(self, api: str, body: dict[str, Any]) -> dict[str, Any]:
        system = body.get("system")
        if isinstance(system, list):  # the first block is a per-request attribution header
            body["system"] = [
                b
                for b in system
                if not (
                    isinstance(b, dict)
                    and str(b.get("text", "")).startswith("x-anthropic-billing-header:")
                )
            ]
        for message in _items(body.get("messages")):
            for block in _items(message.get("content") if isinstance(message, dict) else None):
                if (
                    isinstance(block, dict)
                    and block.get("type") == "text"
                    and "# currentDate" in block.get("text", "")
                ):
                    block["text"] = DATE.sub("<date>", block["text"])
        return body


class CodexProfile(CliProfile):
    """OpenAI's Codex CLI (``@openai/codex``): ``codex exec`` against ``/v1/responses``.

    Everything is in ``$CODEX_HOME/config.toml``: a ``model_providers.assay`` entry with
    ``wire_api = "responses"`` whose key is read from ``OPENAI_API_KEY`` (the token),
    approval ``never`` and sandbox ``danger-full-access`` (Assay's sandbox confines the
    process; Codex's own needs kernel features a container may lack), no update checks, no
    analytics, and the Assay MCP server under ``mcp_servers.assay``."""

    volatile_top = frozenset({"metadata", "user", "prompt_cache_key", "client_metadata"})
    # exec_command's output header: a chunk id and the wall time on every call, and for a
    # command still running past its yield, a session id that is new on every run.
    volatile_output = (
        r"^Chunk ID: (.*)$",
        r"^Wall time: (.*)$",
        r"\bProcess running with session ID (\d+)",
    )

    def environment(self, *, url: str, home: Path, token: str, workdir: Path) -> dict[str, str]:
        return {"CODEX_HOME": str(home / ".codex"), "OPENAI_API_KEY": token}

    def config_files(
        self,
        *,
        url: str,
        home: Path,
        token: str,
        model: str,
        mcp_url: str | None,
        tools: Sequence[str] = (),
    ) -> dict[Path, bytes]:
        lines = [
            f"model = {_toml(model)}",
            'model_provider = "assay"',
            'approval_policy = "never"',
            'sandbox_mode = "danger-full-access"',
            "check_for_update_on_startup = false",
            'web_search = "disabled"',
            "",
            "[analytics]",
            "enabled = false",
            "",
            "[features]",  # no sub-agent threads (parallel model calls) and no goal tools
            "multi_agent = false",
            "goals = false",
            "",
            "[model_providers.assay]",
            'name = "Assay gateway"',
            f"base_url = {_toml(url + '/v1')}",
            'env_key = "OPENAI_API_KEY"',
            'wire_api = "responses"',
            "request_max_retries = 0",  # the gateway retries upstream; a CLI retry is a new call
            "stream_max_retries = 0",
        ]
        if mcp_url:
            lines += [
                "",
                f"[mcp_servers.{MCP_NAME}]",
                f"url = {_toml(mcp_url)}",
                'bearer_token_env_var = "OPENAI_API_KEY"',
            ]
        return {home / ".codex" / "config.toml": ("\n".join(lines) + "\n").encode()}

    def scrub(self, api: str, body: dict[str, Any]) -> dict[str, Any]:
        for item in _items(body.get("input")):
            if not isinstance(item, dict):
                continue
            if item.get("type") in ("message", "function_call_output", "custom_tool_call_output"):
                item.pop("id", None)  # minted by the CLI per run; call_id comes from the model
            for part in _items(item.get("content")):
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    part["text"] = CODEX_DATE.sub(r"\1<date>\2", part["text"])
        return body


CODEX_DATE = re.compile(r"(<current_date>)[^<]*(</current_date>)")


class MiniSweAgentProfile(CliProfile):
    """mini-swe-agent (PyPI ``mini-swe-agent``): ``mini`` with its one ``bash`` tool, through
    litellm against ``/v1/chat/completions``. It runs unattended with ``-y`` and
    ``--exit-immediately``; litellm's model cost map is read from its package (no fetch),
    and cost tracking tolerates a model it has no price for (the gateway prices calls).
    It has no MCP client."""

    def arguments(
        self, base: list[str], *, home: Path, model: str, tools: Sequence[str], mcp_url: str | None
    ) -> list[str]:
        name = model if model.startswith("openai/") else f"openai/{model}"
        options = [f"--model={name}", f"--output={home / 'trajectory.json'}"]
        return _options_before_prompt(base, options)

    def environment(self, *, url: str, home: Path, token: str, workdir: Path) -> dict[str, str]:
        return {
            "OPENAI_BASE_URL": url + "/v1",
            "OPENAI_API_KEY": token,
            "MSWEA_CONFIGURED": "true",
            "MSWEA_COST_TRACKING": "ignore_errors",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_TELEMETRY": "False",
        }


class GeminiCliProfile(CliProfile):
    """Google's Gemini CLI (``@google/gemini-cli``) in headless mode (``--prompt``) against
    the Gemini API (``GOOGLE_GEMINI_BASE_URL``; the token as ``GEMINI_API_KEY``, which it
    sends as ``x-goog-api-key``), ``--approval-mode=yolo`` (Assay's sandbox confines it).

    Its settings are written to ``$HOME/.gemini/settings.json``: the declared tools are its
    only built-in tools (``tools.core``), the Assay MCP server (trusted, the token in its
    header) is the only one allowed (``mcp.allowed``), hooks and skills are off, and there is
    no telemetry, usage statistics or update check. The work tree must be trusted
    (``GEMINI_CLI_TRUST_WORKSPACE``: a headless run refuses an untrusted folder), and a
    trusted folder's ``.gemini/settings.json`` overrides the user's (its hooks and MCP
    servers would run commands no declared tool allows; the CLI honours a *system* settings
    file above it only when root owns it and every folder above it), so a work tree holding
    one is refused at launch unless the desk gives its own ``cli.command``. The CLI does not
    relaunch itself (``GEMINI_CLI_NO_RELAUNCH``), so the process the desk kills is the CLI."""

    # The shell tool's output footer: a process group id that is new on every run.
    volatile_output = (r"^Process Group PGID: (\d+)$", r"\bbackground PIDs?: ([\d, ]+)")

    def arguments(
        self, base: list[str], *, home: Path, model: str, tools: Sequence[str], mcp_url: str | None
    ) -> list[str]:
        return _options_before_prompt(base, [f"--model={model}", "--approval-mode=yolo"])

    def environment(self, *, url: str, home: Path, token: str, workdir: Path) -> dict[str, str]:
        return {
            "GOOGLE_GEMINI_BASE_URL": url,
            "GEMINI_API_KEY": token,
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
            "GEMINI_CLI_NO_RELAUNCH": "true",
            "NO_BROWSER": "true",
        }

    def check_work_tree(self, workdir: Path) -> None:
        _refuse_settings_folder(workdir / ".gemini", "the Gemini CLI")

    def config_files(
        self,
        *,
        url: str,
        home: Path,
        token: str,
        model: str,
        mcp_url: str | None,
        tools: Sequence[str] = (),
    ) -> dict[Path, bytes]:
        return {home / ".gemini" / "settings.json": self.settings(tools, token, mcp_url)}

    def settings(self, tools: Sequence[str], token: str, mcp_url: str | None) -> bytes:
        builtin = [t for t in tools if not t.startswith("mcp_")]
        # tools.core filters MCP tools too: the Assay server's are granted by its prefix.
        granted = [*builtin, f"mcp_{MCP_NAME}_*"] if mcp_url else builtin
        settings: dict[str, Any] = {
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "tools": {"core": granted},
            "mcp": {"allowed": [MCP_NAME] if mcp_url else []},
            "mcpServers": {},
            "hooksConfig": {"enabled": False},
            "skills": {"enabled": False},
            "telemetry": {"enabled": False},
            "privacy": {"usageStatisticsEnabled": False},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        }
        if mcp_url:
            settings["mcpServers"][MCP_NAME] = {
                "httpUrl": mcp_url,
                "headers": {"Authorization": f"Bearer {token}"},
                "trust": True,
            }
        return (json.dumps(settings, indent=2) + "\n").encode()

    def scrub(self, api: str, body: dict[str, Any]) -> dict[str, Any]:
        for content in _items(body.get("contents")):
            for part in _items(content.get("parts") if isinstance(content, dict) else None):
                if isinstance(part, dict):
                    # Opaque model state, not what was said; a resumed CLI no longer has
                    # the signatures it was sent (see repair_resumed).
                    part.pop("thoughtSignature", None)
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    text = GEMINI_DATE.sub(r"\1<date>\2", part["text"])
                    part["text"] = GEMINI_TREE.sub(r"\1<tree>\2", text)
        return body

    def repair_resumed(self, items: list[Any]) -> list[Any]:
        """What the Gemini CLI rebuilds differently when it resumes a chat: each tool result
        twice (from the call's record and from the result's own), and the calls of the
        current loop without the thought signature it gives them while it runs (a
        recorded signature is not kept in its chat file)."""
        repaired = []
        for content in items:
            parts = content.get("parts") if isinstance(content, dict) else None
            if isinstance(parts, list) and content.get("role") == "user":
                unique = [
                    p
                    for i, p in enumerate(parts)
                    if not (isinstance(p, dict) and "functionResponse" in p and p in parts[:i])
                ]
                content = {**content, "parts": unique}
            repaired.append(content)
        return _signed_loop(repaired)


# The Gemini CLI's stand-in for a thought signature it does not have (its
# ensureActiveLoopHasThoughtSignatures): the first call of each model turn since the last
# prompt carries one.
SYNTHETIC_SIGNATURE = "skip_thought_signature_validator"


def _signed_loop(contents: list[Any]) -> list[Any]:
    """``contents`` with the first function call of each model turn since the last user
    prompt (text, no function response) signed, as the Gemini CLI sends them."""
    start = next(
        (
            i
            for i in range(len(contents) - 1, -1, -1)
            if isinstance(contents[i], dict)
            and contents[i].get("role") == "user"
            and any(isinstance(p, dict) and p.get("text") for p in _items(contents[i].get("parts")))
            and not any(
                isinstance(p, dict) and "functionResponse" in p
                for p in _items(contents[i].get("parts"))
            )
        ),
        None,
    )
    if start is None:
        return contents
    signed = list(contents)
    for index in range(start, len(signed)):
        content = signed[index]
        if not isinstance(content, dict) or content.get("role") != "model":
            continue
        parts = _items(content.get("parts"))
        call = next(
            (i for i, p in enumerate(parts) if isinstance(p, dict) and "functionCall" in p), None
        )
        if call is not None and "thoughtSignature" not in parts[call]:
            parts = list(parts)
            parts[call] = {**parts[call], "thoughtSignature": SYNTHETIC_SIGNATURE}
            signed[index] = {**content, "parts": parts}
    return signed


def _refuse_settings_folder(folder: Path, cli: str) -> None:
    """``BadInput`` when a work tree's settings folder of a Gemini-CLI-like CLI holds its
    settings (merged over the user's: their hooks and MCP servers would run)."""
    if folder.is_symlink() or os.path.lexists(folder / "settings.json"):
        raise _configures(
            folder / "settings.json",
            f"{cli} (hooks and MCP servers the desk does not declare would run)",
        )


def _configures(path: Path, what: str) -> BadInput:
    return BadInput(
        f"{path}: the work tree configures {what}; remove it from the branch, or give the "
        "desk its own cli.command to accept it"
    )


GEMINI_DATE = re.compile(r"(Today's date is )[^\n]*?( \(formatted)")
# The session context lists the work tree as the CLI found it at launch: a relaunched CLI
# finds the same files (the tree is restored) but the journal under .assay/ has grown.
GEMINI_TREE = re.compile(r"(- \*\*Directory Structure:\*\*\n).*?(</session_context>)", re.DOTALL)


class QwenCodeProfile(CliProfile):
    """Qwen Code (``@qwen-code/qwen-code``, a fork of the Gemini CLI) in headless mode
    (``--prompt``) against ``/v1/chat/completions``: its ``openai`` auth reads
    ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` (the token) from the environment, so no
    command line carries the key. ``--approval-mode=yolo``: Assay's sandbox confines it.

    Its settings are written to ``$HOME/.qwen/settings.json``: the declared tools are its
    only core tools (``tools.core``), the tools it registers outside that list (sub-agents,
    skills, goals, worktrees, cron, tool search...) are denied unless declared
    (``permissions.deny``), the Assay MCP server is the only one allowed, hooks, skills and
    its memory subagents are off, and there is no telemetry, usage statistics or update
    check. As for the Gemini
    CLI, a work tree's ``.qwen/settings.json`` would override the user's, so a work tree
    holding one is refused at launch unless the desk gives its own ``cli.command``.

    It resumes its own session (``qwen --resume ID``; the desk names it with
    ``--session-id`` at the first launch): its chat in
    ``$HOME/.qwen/projects/<work-tree-slug>/chats/ID.jsonl``, written behind its requests."""

    volatile_output = GeminiCliProfile.volatile_output  # its shell tool's footer is the same
    # What 0.24 registers beside its core tools; denied unless the desk declares one.
    EXTRA_TOOLS: ClassVar[tuple[str, ...]] = (
        "agent",
        "cron_create",
        "cron_delete",
        "cron_list",
        "enter_worktree",
        "exit_worktree",
        "get_goal",
        "list_agents",
        "loop_wakeup",
        "monitor",
        "read_mcp_resource",
        "record_artifact",
        "report_findings",
        "send_message",
        "skill",
        "task_stop",
        "tool_call",
        "tool_search",
        "update_goal",
        "web_fetch",
        "zoom_image",
    )

    def arguments(
        self, base: list[str], *, home: Path, model: str, tools: Sequence[str], mcp_url: str | None
    ) -> list[str]:
        return _options_before_prompt(base, [f"--model={model}", "--approval-mode=yolo"])

    def environment(self, *, url: str, home: Path, token: str, workdir: Path) -> dict[str, str]:
        return {
            "OPENAI_BASE_URL": url + "/v1",
            "OPENAI_API_KEY": token,
            "QWEN_CODE_NO_RELAUNCH": "true",  # the process the desk kills is the CLI
            "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1",
            "NO_BROWSER": "true",
        }

    def check_work_tree(self, workdir: Path) -> None:
        _refuse_settings_folder(workdir / ".qwen", "Qwen Code")

    def config_files(
        self,
        *,
        url: str,
        home: Path,
        token: str,
        model: str,
        mcp_url: str | None,
        tools: Sequence[str] = (),
    ) -> dict[Path, bytes]:
        builtin = [t for t in tools if not t.startswith("mcp__")]
        settings: dict[str, Any] = {
            "security": {"auth": {"selectedType": "openai"}, "folderTrust": {"enabled": False}},
            # Its pipe runner settles a command on "exit", before the pipe's last data: a
            # quick command's output is lost now and then (0.24.4). The pty runner is not.
            "tools": {
                "core": builtin,
                "useRipgrep": False,
                "shell": {"enableInteractiveShell": True},
            },
            "permissions": {"deny": [t for t in self.EXTRA_TOOLS if t not in tools]},
            "skills": {"disabledLevels": ["project", "user", "extension", "bundled"]},
            # Its memory subagents are model calls of their own, with tools, in the background
            # once a turn has ended (a relaunch need not make them again: a divergence).
            "memory": {"enableManagedAutoMemory": False, "enableManagedAutoDream": False},
            "disableAllHooks": True,
            "mcp": {"allowed": [MCP_NAME] if mcp_url else []},
            "mcpServers": {},
            "general": {"enableAutoUpdate": False},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
        }
        if mcp_url:
            settings["mcpServers"][MCP_NAME] = {
                "httpUrl": mcp_url,
                "headers": {"Authorization": f"Bearer {token}"},
                "trust": True,
            }
        text = json.dumps(settings, indent=2) + "\n"
        return {home / ".qwen" / "settings.json": text.encode()}

    def scrub(self, api: str, body: dict[str, Any]) -> dict[str, Any]:
        for message in _items(body.get("messages")):
            if not isinstance(message, dict):
                continue
            if message.get("role") == "system" and isinstance(message.get("content"), str):
                message["content"] = QWEN_GIT.sub("", message["content"])
            if message.get("role") != "user":
                continue
            content = message.get("content")
            parts = content if isinstance(content, list) else [message]
            key = "text" if isinstance(content, list) else "content"
            for part in parts:
                if isinstance(part, dict) and isinstance(part.get(key), str):
                    text = QWEN_DATE.sub(r"\1<date>", part[key])
                    part[key] = QWEN_TREE.sub(r"\1<tree>\2", text)
        return body

    def resumed_request(self, api: str, body: dict[str, Any]) -> dict[str, Any]:
        """The base's, with the date reminder put back where the first process had it:
        Qwen Code puts one before the first prompt each process is given and keeps none in
        its chat file, so a resumed session has it before the resume prompt (taken out with
        it) and none before the brief's."""
        reminders = [
            part
            for message in _items(body.get("messages"))
            if isinstance(message, dict) and _holds_resume_prompt(message.get("content"))
            for part in message["content"]
            if _is_date_reminder(part)
        ]
        repaired = super().resumed_request(api, body)
        if not reminders:
            return repaired
        messages = list(_items(repaired.get("messages")))
        for index, message in enumerate(messages):
            if not isinstance(message, dict) or message.get("role") != "user":
                continue
            content = message.get("content")
            if isinstance(content, list) and content and not any(map(_is_date_reminder, content)):
                content = [*content[:-1], reminders[-1], content[-1]]  # right before the prompt
                messages[index] = {**message, "content": content}
            break
        return {**repaired, "messages": messages}


def _holds_resume_prompt(content: Any) -> bool:
    return any(
        isinstance(part, dict) and str(part.get("text", "")).strip() == RESUME_PROMPT
        for part in _items(content)
    )


def _is_date_reminder(part: Any) -> bool:
    return isinstance(part, dict) and str(part.get("text", "")).startswith(QWEN_REMINDER)


QWEN_REMINDER = "<system-reminder>\nThe current date is: "
# Its startup context and its date reminder name the day; the context lists the work tree
# as found at launch (a relaunched CLI finds the same files, but the journal has grown).
QWEN_DATE = re.compile(r"(Today's date is |The current date is: )[^\n.]*")
# The system prompt's git snapshot (branch, status, last commits) when `git status` answered
# within its time: after a resume it shows the desk's own checkpoint commits, or nothing. Its
# section goes with the separator before it: the prompt reads the same without one.
QWEN_GIT = re.compile(
    r"(?:\n\n|\A)Git snapshot at conversation start\..*?\n```(?=\n\n|\Z)", re.DOTALL
)
QWEN_TREE = re.compile(
    r"(folder structure of the current working directories:\n).*?(</system-reminder>)", re.DOTALL
)


class OpenCodeProfile(CliProfile):
    """OpenCode (npm ``opencode-ai``): ``opencode run`` against ``/v1/chat/completions``
    through a custom provider of the AI SDK's ``@ai-sdk/openai-compatible`` (bundled in the
    binary: nothing is installed at run time).

    Its config is written to ``$HOME/.config/opencode/opencode.json`` (no ``opencode.json``
    in the repository): the provider ``assay`` with the gateway's base URL and the key read
    from ``ASSAY_GATEWAY_TOKEN`` (``{env:…}``, so the file holds no secret), the desk's model
    as both ``model`` and ``small_model`` (its title request), permissions that deny every
    tool but the declared ones and Assay's MCP tools (a denied tool is not offered), and
    the Assay MCP server as a remote server. ``OPENCODE_DISABLE_PROJECT_CONFIG`` keeps a
    work tree's ``opencode.json``, ``.opencode/`` (agents, commands, plugins) and
    ``AGENTS.md`` out; no model list fetch, update check, sharing or default plugins.

    It resumes its own session (``opencode run --continue``: its HOME holds this one
    session), kept in a SQLite database, ``$HOME/.local/share/opencode/opencode.db`` with its
    write-ahead log, from which it builds each request (so a turn's tool results are in it
    before the turn is sent): recorded as a consistent copy, redacted through SQL."""

    def environment(self, *, url: str, home: Path, token: str, workdir: Path) -> dict[str, str]:
        return {
            "ASSAY_GATEWAY_TOKEN": token,
            "OPENCODE_DISABLE_PROJECT_CONFIG": "true",
            "OPENCODE_DISABLE_MODELS_FETCH": "true",
            "OPENCODE_DISABLE_AUTOUPDATE": "true",
            "OPENCODE_DISABLE_SHARE": "true",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "true",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "true",
            "OPENCODE_DISABLE_CLAUDE_CODE": "true",
        }

    def config_files(
        self,
        *,
        url: str,
        home: Path,
        token: str,
        model: str,
        mcp_url: str | None,
        tools: Sequence[str] = (),
    ) -> dict[Path, bytes]:
        permission = {"*": "deny", **{tool: "allow" for tool in tools}}
        config: dict[str, Any] = {
            "$schema": "https://opencode.ai/config.json",
            "model": f"{MCP_NAME}/{model}",
            "small_model": f"{MCP_NAME}/{model}",
            "autoupdate": False,
            "share": "disabled",
            "provider": {
                MCP_NAME: {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "Assay gateway",
                    "options": {"baseURL": url + "/v1", "apiKey": "{env:ASSAY_GATEWAY_TOKEN}"},
                    "models": {model: {"name": model, "tool_call": True}},
                }
            },
            "permission": permission,
            "mcp": {},
        }
        if mcp_url:
            permission[f"{MCP_NAME}_*"] = "allow"
            config["mcp"][MCP_NAME] = {
                "type": "remote",
                "url": mcp_url,
                "headers": {"Authorization": "Bearer {env:ASSAY_GATEWAY_TOKEN}"},
                "oauth": False,
            }
        text = json.dumps(config, indent=2) + "\n"
        return {home / ".config" / "opencode" / "opencode.json": text.encode()}

    def scrub(self, api: str, body: dict[str, Any]) -> dict[str, Any]:
        for message in _items(body.get("messages")):
            if isinstance(message, dict) and isinstance(message.get("content"), str):
                message["content"] = OPENCODE_DATE.sub(r"\1<date>", message["content"])
        return body

    def repair_resumed(self, items: list[Any]) -> list[Any]:
        """Without the resume prompt as ``run`` sends it: in double quotes (it quotes a
        message that holds spaces)."""
        quoted = json.dumps(RESUME_PROMPT)
        return [
            item
            for item in items
            if not (
                isinstance(item, dict)
                and item.get("role") == "user"
                and isinstance(item.get("content"), str)
                and item["content"].strip() == quoted
            )
        ]


OPENCODE_DATE = re.compile(r"(Today's date: )[^\n]*")


class AiderProfile(CliProfile):
    """aider (PyPI ``aider-chat``) with one ``--message``, against ``/v1/chat/completions``
    through litellm (``openai/M``; ``OPENAI_API_BASE``, ``OPENAI_API_KEY`` the token).

    aider sends no ``tools``: the model edits files by writing them out in its reply (an edit
    format), and aider asks again on its own (a *reflection*) when an edit fails to apply,
    the reply names a file it must add, or its linter finds errors in an edited file. So its
    calls without tools are conversation turns (``toolless_turns``), matched like any turn
    on resume. It runs with ``--yes-always`` (the shell commands a reply suggests need an
    explicit yes, which it never gives: ``--no-suggest-shell-commands``), ``--no-git``
    (Assay commits), its histories in HOME (not the work tree), and the model's metadata in
    ``$HOME/.aider.model.metadata.json`` (it would fetch litellm's price list). Its
    ``.aider.conf.yml``, ``.env`` and model settings files are read from the work tree too,
    over the profile's (an ``.env`` sets its base URL, lint and test commands), so a work
    tree holding one is refused at launch unless the desk gives its own ``cli.command``.
    It has no MCP client."""

    toolless_turns = True
    WORK_TREE_CONFIG: ClassVar[tuple[str, ...]] = (
        ".aider.conf.yml",
        ".env",
        ".aider.model.settings.yml",
        ".aider.model.metadata.json",
    )

    def arguments(
        self, base: list[str], *, home: Path, model: str, tools: Sequence[str], mcp_url: str | None
    ) -> list[str]:
        options = [
            f"--model={self.litellm_model(model)}",
            # its "weak" model (commit messages, history summaries) is the desk's model too:
            # the one whose metadata the profile writes, so it looks up nothing online
            f"--weak-model={self.litellm_model(model)}",
            "--yes-always",
            "--no-git",
            "--no-suggest-shell-commands",
            "--no-detect-urls",
            "--no-check-update",
            "--no-show-release-notes",
            "--no-show-model-warnings",
            "--no-pretty",
            "--no-fancy-input",
            f"--chat-history-file={home / '.aider.chat.history.md'}",
            f"--input-history-file={home / '.aider.input.history'}",
            f"--env-file={home / '.env'}",
        ]
        return _options_before_prompt(base, options)

    @staticmethod
    def litellm_model(model: str) -> str:
        return model if model.startswith("openai/") else f"openai/{model}"

    def environment(self, *, url: str, home: Path, token: str, workdir: Path) -> dict[str, str]:
        return {
            "OPENAI_API_BASE": url + "/v1",
            "OPENAI_API_KEY": token,
            "AIDER_ANALYTICS": "false",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_TELEMETRY": "False",
        }

    def check_work_tree(self, workdir: Path) -> None:
        for name in self.WORK_TREE_CONFIG:
            if os.path.lexists(workdir / name):
                raise _configures(
                    workdir / name,
                    "aider (its base URL, lint and test commands would be the branch's)",
                )

    def config_files(
        self,
        *,
        url: str,
        home: Path,
        token: str,
        model: str,
        mcp_url: str | None,
        tools: Sequence[str] = (),
    ) -> dict[Path, bytes]:
        # Prices are the gateway's; a context window aider need not look up on the network.
        metadata = {
            self.litellm_model(model): {
                "max_input_tokens": 128000,
                "max_output_tokens": 16384,
                "input_cost_per_token": 0,
                "output_cost_per_token": 0,
                "litellm_provider": "openai",
                "mode": "chat",
            }
        }
        text = json.dumps(metadata, indent=2) + "\n"
        return {home / ".aider.model.metadata.json": text.encode()}

    def scrub(self, api: str, body: dict[str, Any]) -> dict[str, Any]:
        # Its tools' output reaches the model as user messages it writes itself (a lint
        # report, a command's output): the volatile parts are masked there.
        found = RUNNER_TIMES + self.output_masks()
        for message in _items(body.get("messages")):
            if (
                isinstance(message, dict)
                and message.get("role") == "user"
                and isinstance(message.get("content"), str)
                and message["content"].startswith(AIDER_TOOL_OUTPUT)
            ):
                message["content"] = mask_text(message["content"], found)
        return body


AIDER_TOOL_OUTPUT = ("# Fix any errors below", "I ran this command:")


class GenericProfile(CliProfile):
    """Any other CLI: the common base-URL variables and the token as both keys, nothing else;
    the desk's ``cli.command`` is required."""

    def environment(self, *, url: str, home: Path, token: str, workdir: Path) -> dict[str, str]:
        return {
            "ANTHROPIC_BASE_URL": url,
            "OPENAI_BASE_URL": url + "/v1",
            "OPENAI_API_BASE": url + "/v1",
            "GOOGLE_GEMINI_BASE_URL": url,
            "ANTHROPIC_API_KEY": token,
            "OPENAI_API_KEY": token,
            "GEMINI_API_KEY": token,
        }


# What a desk's cli.command, cli.env and cli.files may name: filled in at launch. The token
# only in env and files: a command line is readable by every process on the machine.
PLACEHOLDERS = ("prompt", "gateway_url", "mcp_url", "home", "workdir", "model", "token")
_PLACEHOLDER = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def fill_placeholders(text: str, values: Mapping[str, str]) -> str:
    """``text`` with each ``{name}`` of ``values`` replaced, in one pass (a value that
    holds a placeholder's spelling is not filled again); other braces are left as they are
    (a JSON config file is full of them)."""
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)


def check_command_arg(arg: str, *, where: str) -> None:
    """``BadInput`` when a command argument would carry the gateway's token."""
    if "{token}" in arg:
        raise BadInput(
            f"{where}: {{token}} may not be on a command line (every process on the machine "
            "can read one): pass it in cli.env and let the CLI read it from there"
        )


def check_env_name(name: str, *, where: str) -> None:
    if not _ENV_NAME.fullmatch(name):
        raise BadInput(f"{where}: {name!r} is not an environment variable name")


def check_home_path(relative: str, *, where: str = "cli.files") -> str:
    """``relative`` when it names a file inside the CLI's private HOME, else ``BadInput``."""
    parts = PurePosixPath(relative).parts
    if not relative or relative.startswith("/") or ".." in parts or not parts:
        raise BadInput(
            f"{where}: {relative!r} must be a path inside the CLI's HOME (relative, no '..')"
        )
    return relative


def _items(value: Any) -> list[Any]:
    """``value`` when it is a list (request bodies are untrusted shapes), else nothing."""
    return value if isinstance(value, list) else []


def _toml(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's for the characters that matter)."""
    return json.dumps(value)


PROFILES: Mapping[str, CliProfile] = MappingProxyType(
    {
        "claude-code": ClaudeCodeProfile(
            "claude-code",
            "anthropic",
            ("claude", "--print", "--output-format=json", "--", PROMPT),
            install="npm install -g @anthropic-ai/claude-code",
            resume=NativeResume(
                files=(".claude/projects/**",),  # the transcript, and tool output kept aside
                first=("--session-id={session}",),
                again=("--resume={session}",),
                result='"tool_use_id":"{id}"',  # its transcript is written behind its calls
                fillers=("No response requested.",),
                env={"CLAUDE_CODE_RESUME_PROMPT": PROMPT},  # added to an interrupted turn
            ),
        ),
        "codex": CodexProfile(
            "codex",
            "openai-responses",
            ("codex", "exec", "--skip-git-repo-check", "--color=never", "--", PROMPT),
            install="npm install -g @openai/codex",
            resume=NativeResume(
                files=(".codex/sessions/**/rollout-*.jsonl",),
                again=("resume", "--last"),  # its HOME holds this one session
                result='"call_id":"{id}","output":',
            ),
        ),
        "mini-swe-agent": MiniSweAgentProfile(
            "mini-swe-agent",
            "openai-chat",
            ("mini", "--yolo", "--exit-immediately", f"--task={PROMPT}"),
            mcp=False,
            install="pip install mini-swe-agent",
        ),
        "gemini-cli": GeminiCliProfile(
            "gemini-cli",
            "gemini",
            ("gemini", f"--prompt={PROMPT}"),
            install="npm install -g @google/gemini-cli",
            resume=NativeResume(
                files=(
                    ".gemini/projects.json",  # which chat folder is the work tree's
                    ".gemini/tmp/*/.project_root",
                    ".gemini/history/*/.project_root",
                    ".gemini/tmp/*/chats/session-*.json*",
                ),
                again=("--resume=latest",),  # its HOME holds this one session
                fillers=("[The previous response was interrupted before it completed.]",),
            ),
        ),
        "qwen-code": QwenCodeProfile(
            "qwen-code",
            "openai-chat",
            ("qwen", f"--prompt={PROMPT}"),
            install="npm install -g @qwen-code/qwen-code",
            resume=NativeResume(
                files=(".qwen/projects/*/chats/*.jsonl",),
                first=("--session-id={session}",),
                again=("--resume={session}",),
                result='"functionResponse":{"id":"{id}"',  # written behind its requests
            ),
        ),
        "opencode": OpenCodeProfile(
            "opencode",
            "openai-chat",
            ("opencode", "run", "--", PROMPT),
            install="npm install -g opencode-ai",
            resume=NativeResume(
                files=(".local/share/opencode/opencode.db",),
                databases=(".local/share/opencode/opencode.db",),
                again=("--continue",),  # its HOME holds this one session
            ),
        ),
        "aider": AiderProfile(
            "aider",
            "openai-chat",
            ("aider", f"--message={PROMPT}"),
            mcp=False,
            install="pip install aider-chat",
        ),
        "generic": GenericProfile("generic", "openai-chat", ()),
    }
)


def get_profile(name: str) -> CliProfile:
    """The profile called ``name``; ``BadInput`` naming it and the known ones otherwise."""
    try:
        return PROFILES[name]
    except (KeyError, TypeError):
        known = ", ".join(sorted(PROFILES))
        raise BadInput(
            f"cli.profile: unknown agent CLI profile {name!r} (known: {known})"
        ) from None
