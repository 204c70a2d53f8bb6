"""The agent tools: files and commands inside one work tree, and nothing outside it.

``ToolBox(worktree, policy)`` is the ``ToolRunner`` the runtime calls for every tool step:

| tool | arguments | result |
| --- | --- | --- |
| ``read_file`` | ``path`` | ``{path, content, truncated}`` |
| ``write_file`` | ``path``, ``content`` | ``{path, bytes}`` |
| ``list_files`` | ``path`` (default ``.``) | ``{path, files, truncated}`` |
| ``run`` | ``command`` (one string) | ``{command, exit, timed_out, seconds, output, truncated}`` |
| ``finish`` | ``summary``, ``evidence`` rows | ``{finished, summary, evidence}`` |

Refusals are ``Denied`` (exit 77): a tool the desk did not declare, a path that is absolute,
holds ``..``, reaches through a symlink out of the tree or into ``.git``/``.assay``, or a
command that does not start with one of the allowed prefixes. Malformed arguments are
``ToolError`` (a ``BadInput``), which an agent loop may hand back to the model.

``run`` splits its command with ``shlex`` and executes the argv directly (never a shell)
in the sandbox (``assay.sandbox``), one kept for the run and entered by each command (a
ward: ``assay.sandbox.ward``): the work tree its only writable path, every process it
started killed when the call ends, a fresh ``/tmp`` and ``HOME`` each time, the network
the manifest's ``sandbox:`` allows, and an environment holding only a few harmless
variables plus the ones the manifest passes, never a secret.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from assay.errors import BadInput, Denied
from assay.sandbox import SandboxSpec, sandbox_environment
from assay.sandbox.environ import process_environment
from assay.sandbox.ward import Ward

TOOL_NAMES: tuple[str, ...] = ("read_file", "write_file", "list_files", "run", "finish")

PROTECTED_DIRS: frozenset[str] = frozenset({".git", ".assay"})


class ToolError(BadInput):
    """A tool was called with malformed arguments (missing, wrong type, not UTF-8...)."""


@dataclass(frozen=True)
class ToolPolicy:
    """What a desk's tools may do; built from its manifest by ``DeskManifest.tool_policy``."""

    allowed: frozenset[str] = frozenset({"read_file", "write_file", "list_files", "finish"})
    run_prefixes: tuple[tuple[str, ...], ...] = ()
    run_timeout_s: float = 300.0
    max_output_bytes: int = 64_000
    max_read_bytes: int = 512_000
    max_write_bytes: int = 4_000_000
    max_list_entries: int = 5_000
    env: tuple[str, ...] = ()
    secrets: tuple[str, ...] = field(default=())
    sandbox: SandboxSpec = field(default_factory=SandboxSpec)


def _text_arg(args: dict[str, Any], name: str, *, required: bool = True, default: str = "") -> str:
    value = args.get(name, None if required else default)
    if not isinstance(value, str):
        raise ToolError(f"argument {name!r} must be a string")
    return value


class ToolBox:
    """Runs the declared tools inside ``worktree`` under ``policy`` (the ``ToolRunner``)."""

    def __init__(self, worktree: Path, policy: ToolPolicy, *, withheld: Iterable[str] = ()) -> None:
        self.root = worktree.resolve()
        self.policy = policy
        # Secret values (the forge's token, the desk's secrets): a variable holding one is
        # never passed to a command, whatever its name.
        self._withheld = tuple(value for value in withheld if value)
        self.allowed: frozenset[str] = frozenset(policy.allowed)
        unknown = self.allowed - set(TOOL_NAMES)
        if unknown:
            raise BadInput(f"unknown tools in policy: {', '.join(sorted(unknown))}")
        # One sandbox for the run's commands, built at the first: one per command cost
        # bubblewrap ten times what the command itself did (docs/sandbox.md, "Cost").
        self._ward = Ward(self.root, policy.sandbox)

    def close(self) -> None:
        """End the run's sandbox (``run`` builds a new one if called again)."""
        self._ward.close()

    # -- the ToolRunner seam -------------------------------------------------------------

    def call(self, name: str, args: dict[str, Any]) -> Any:
        """Run tool ``name``; ``Denied`` when it is not declared, ``ToolError`` on bad args."""
        if name not in self.allowed:
            raise Denied(f"tool {name!r} is not declared by this desk", tool=name)
        if not isinstance(args, dict):
            raise ToolError(f"{name}: arguments must be an object")
        handler = getattr(self, f"_tool_{name}")
        try:
            return handler(args)
        except OSError as exc:
            # A file where a directory should be, a name too long, a permission: the
            # model's mistake to correct, not a crash of the run.
            raise ToolError(f"{name}: {exc.strerror or exc}", tool=name) from None

    def specs(self) -> list[dict[str, Any]]:
        """OpenAI function-tool schemas of the declared tools, in a stable order."""
        return tool_specs(self.policy)

    # -- paths ---------------------------------------------------------------------------

    def resolve(self, raw: str, *, for_write: bool = False) -> Path:
        """The absolute path of ``raw`` inside the work tree, or ``Denied``."""
        if "\x00" in raw:
            raise ToolError("path must not contain NUL characters")
        if raw.startswith(("/", "\\", "~")) or re.match(r"^[A-Za-z]:", raw):
            raise Denied(f"path {raw!r} is absolute; paths are relative to the work tree")
        parts = PurePosixPath(raw.replace("\\", "/")).parts
        if ".." in parts:
            raise Denied(f"path {raw!r} leaves the work tree")
        if parts and parts[0] in PROTECTED_DIRS:
            raise Denied(f"path {raw!r} is inside {parts[0]}/, which tools may not touch")
        target = (self.root / Path(*parts)) if parts else self.root
        try:
            resolved = target.resolve()
        except (OSError, RuntimeError) as exc:  # a symlink loop, a name too long
            raise ToolError(f"path {raw!r} cannot be resolved: {exc}") from None
        if resolved != self.root and not resolved.is_relative_to(self.root):
            raise Denied(f"path {raw!r} leads out of the work tree through a symlink")
        inside = resolved.relative_to(self.root).parts
        if inside and inside[0] in PROTECTED_DIRS:
            raise Denied(f"path {raw!r} leads into {inside[0]}/, which tools may not touch")
        if for_write and resolved == self.root:
            raise ToolError("write_file needs a file path")
        return resolved

    def _relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() or "."

    # -- tools ---------------------------------------------------------------------------

    def _tool_read_file(self, args: dict[str, Any]) -> dict[str, Any]:
        path = self.resolve(_text_arg(args, "path"))
        if not path.is_file():
            raise ToolError(f"read_file: {self._relative(path)!r} is not a file")
        limit = self.policy.max_read_bytes
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
        return {
            "path": self._relative(path),
            "content": data[:limit].decode("utf-8", errors="replace"),
            "truncated": len(data) > limit,
        }

    def _tool_write_file(self, args: dict[str, Any]) -> dict[str, Any]:
        raw = _text_arg(args, "path")
        content = _text_arg(args, "content")
        data = content.encode("utf-8", errors="surrogatepass")
        if len(data) > self.policy.max_write_bytes:
            raise ToolError(f"write_file: content is over {self.policy.max_write_bytes} bytes")
        path = self.resolve(raw, for_write=True)
        if path.is_dir():
            raise ToolError(f"write_file: {self._relative(path)!r} is a directory")
        # Create parents one by one, re-checking each, so a symlinked parent cannot be
        # swapped in between the check and the write.
        path.parent.mkdir(parents=True, exist_ok=True)
        self.resolve(self._relative(path.parent))
        temporary = path.with_name(f".{path.name}.assay-tmp")
        temporary.write_bytes(data)
        os.replace(temporary, path)
        return {"path": self._relative(path), "bytes": len(data)}

    def _tool_list_files(self, args: dict[str, Any]) -> dict[str, Any]:
        start = self.resolve(_text_arg(args, "path", required=False, default="."))
        if not start.is_dir():
            raise ToolError(f"list_files: {self._relative(start)!r} is not a directory")
        files: list[str] = []
        truncated = False
        for directory, dirnames, filenames in os.walk(start, followlinks=False):
            here = Path(directory)
            dirnames[:] = sorted(
                d for d in dirnames if not (here == self.root and d in PROTECTED_DIRS)
            )
            for name in sorted(filenames):
                if len(files) >= self.policy.max_list_entries:
                    truncated = True
                    break
                files.append(self._relative(here / name))
            if truncated:
                break
        return {"path": self._relative(start), "files": sorted(files), "truncated": truncated}

    def check_command(self, command: str) -> list[str]:
        """The argv of ``command`` if it starts with an allowed prefix, else ``Denied``."""
        if "\x00" in command:
            raise ToolError("run: command must not contain NUL characters")
        try:
            argv = split_command(command)
        except ValueError as exc:
            raise ToolError(f"run: {exc}") from None
        if not argv:
            raise ToolError("run: empty command")
        for prefix in self.policy.run_prefixes:
            if tuple(argv[: len(prefix)]) == prefix:
                return argv
        allowed = ", ".join(shlex.join(p) for p in self.policy.run_prefixes) or "none"
        raise Denied(
            f"command {shlex.join(argv[:3])!r}... is not allowed (allowed prefixes: {allowed})",
            tool="run",
        )

    def command_env(self) -> dict[str, str]:
        """The environment ``run`` gives a command: harmless names plus declared ones."""
        return sandbox_environment(
            self.policy.env, secrets=self.policy.secrets, withheld=self._withheld
        )

    def process_env(self) -> dict[str, str]:
        """What a ``run`` command really gets in the sandbox (its ``PATH`` as the sandbox
        sets it): the environment the desk fingerprints, as the gate fingerprints its rows'."""
        return process_environment(self.policy.sandbox, self.command_env())

    def _tool_run(self, args: dict[str, Any]) -> dict[str, Any]:
        command = _text_arg(args, "command")
        argv = self.check_command(command)
        result = self._ward.run(
            argv,
            env=self.command_env(),
            timeout_s=self.policy.run_timeout_s,
            max_output_bytes=self.policy.max_output_bytes,
        )
        return {
            "command": shlex.join(argv),
            "exit": None if result.timed_out else result.exit,
            "timed_out": result.timed_out,
            "seconds": result.seconds,
            "output": result.output(),
            "truncated": result.truncated,
        }

    def _tool_finish(self, args: dict[str, Any]) -> dict[str, Any]:
        summary = _text_arg(args, "summary")
        rows = args.get("evidence", [])
        if not isinstance(rows, list):
            raise ToolError("finish: evidence must be a list of rows")
        evidence: list[dict[str, str]] = []
        for index, row in enumerate(rows):
            if not isinstance(row, dict):
                raise ToolError(f"finish: evidence[{index}] must be an object")
            row_id, result, note = row.get("row"), row.get("result"), row.get("note", "")
            if not isinstance(row_id, str) or not row_id:
                raise ToolError(f"finish: evidence[{index}].row must name a verify row")
            if result not in ("pass", "fail"):
                raise ToolError(f"finish: evidence[{index}].result must be 'pass' or 'fail'")
            if not isinstance(note, str):
                raise ToolError(f"finish: evidence[{index}].note must be a string")
            evidence.append({"row": row_id, "result": result, "note": note})
        return {"finished": True, "summary": summary, "evidence": evidence}


def _spec(name: str, policy: ToolPolicy) -> dict[str, Any]:
    def function(
        description: str, properties: dict[str, Any], required: list[str]
    ) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": name,
                "description": description,
                "parameters": {
                    "type": "object",
                    "properties": properties,
                    "required": required,
                    "additionalProperties": False,
                },
            },
        }

    path = {"type": "string", "description": "Path relative to the work tree."}
    if name == "read_file":
        return function("Read a UTF-8 text file of the work tree.", {"path": path}, ["path"])
    if name == "write_file":
        return function(
            "Create or replace a file of the work tree with the given text.",
            {"path": path, "content": {"type": "string", "description": "The whole new text."}},
            ["path", "content"],
        )
    if name == "list_files":
        return function("List files under a directory of the work tree.", {"path": path}, [])
    if name == "run":
        allowed = "; ".join(shlex.join(p) for p in policy.run_prefixes) or "none"
        return function(
            "Run a command in the work tree (no shell: no pipes, redirections or variables). "
            f"It must start with one of these prefixes: {allowed}. "
            f"Timeout {policy.run_timeout_s:g} s.",
            {"command": {"type": "string", "description": "The command line."}},
            ["command"],
        )
    row = {
        "type": "object",
        "properties": {
            "row": {"type": "string", "description": "A verify row id of the brief."},
            "result": {"type": "string", "enum": ["pass", "fail"]},
            "note": {"type": "string"},
        },
        "required": ["row", "result"],
        "additionalProperties": False,
    }
    return function(
        "Finish the brief: a summary of the work and what you believe each verify row gives.",
        {
            "summary": {"type": "string"},
            "evidence": {"type": "array", "items": row},
        },
        ["summary"],
    )


def tool_specs(policy: ToolPolicy) -> list[dict[str, Any]]:
    """OpenAI function-tool schemas of the tools ``policy`` declares, in a stable order.

    The one statement of the tools' arguments: ``ToolBox.specs`` and the MCP server's
    descriptors both read it.
    """
    return [_spec(name, policy) for name in TOOL_NAMES if name in policy.allowed]


def split_command(text: str) -> list[str]:
    """The argv of a command line (shell words, no shell); ``ValueError`` when it is not one."""
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"not a valid command line: {exc}") from None
