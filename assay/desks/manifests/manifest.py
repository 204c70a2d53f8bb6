"""Desk manifests: ``desks/<name>.yaml`` says which briefs a desk takes and how it works.

```yaml
name: coder
description: Writes small Python changes.
takes: {labels: [python], ids: [fix-login], globs: ["calc-*"]}
kind: agent                     # agent | command | python | cli
model: {adapter: scripted, script: scripts/coder.yaml}
tools: [read_file, write_file, list_files, run, finish]
run:                            # required when `run` is a tool: the allowed command prefixes
  allow: ["pytest -q", "python -m pytest", "ruff check"]
  timeout_s: 300
lease: 5m                       # seconds, or a duration like 90s / 5m / 1h
budget: {steps: 60, model_calls: 30, usd: 1.0}
concurrency: 1
on_divergence: fail             # fail | fork
durability: window              # step | window | exit: what reaches the forge, and when
checkpoint_window: 30s          # window: the longest a step waits before it is pushed
sandbox:                        # what tools, command desks and agent CLIs may reach
  network: none                 # none (default) | gateway (the coming cli kind's default) | host
  isolation: on                 # off: no bubblewrap at all (needs network: host; unsandboxed)
  read_only: [/opt/data]        # extra paths visible read-only (relative: from this file)
  toolchains: [python, node]    # prefixes the commands need outside /usr (default: python)
```

A ``python`` desk names ``entry: module:function`` (written against the ``Run`` API); a
``command`` desk names ``command:`` (argv, or one string split like a shell would, without
one). A ``cli`` desk runs an agent CLI behind the model gateway (docs/agent-clis.md): it
has a ``cli:`` section (``profile``, optional ``command``, ``api``, ``timeout_s``,
``volatile_output``), an
``openai`` or ``anthropic`` model (the upstream), and its ``tools`` are the CLI's own tool
names the agent may call plus Assay's tools it may call over MCP.

This module owns parsing and validating manifests, ``split_desks()``, ``load_desks()`` and
``DeskManifest.takes_brief()``.
"""

from __future__ import annotations

import importlib
import os
import re
import shlex
import sys
from collections.abc import Callable
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, PrivateAttr, ValidationError, field_validator

from assay.briefs.format import Brief, BudgetSpec, StrictModel
from assay.briefs.yamldoc import YamlDoc, load_yaml, validation_error
from assay.claims.record import MAX_LEASE_S
from assay.desks.kinds.tools import TOOL_NAMES, ToolPolicy, split_command
from assay.errors import BadInput
from assay.gateway.apis import REGISTRY, ApiName
from assay.ids import check_id
from assay.models.base import ModelAdapter
from assay.models.config import ModelConfig
from assay.sandbox import SandboxSpec

_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*")
_UNITS = {None: 1.0, "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_duration(value: Any) -> Any:
    """``90``, ``"90s"``, ``"5m"``, ``"1h"`` -> seconds as a float (other input unchanged)."""
    if isinstance(value, str):
        match = _DURATION.fullmatch(value)
        if not match:
            raise ValueError(f"{value!r} is not a duration (e.g. 90, 90s, 5m, 1h)")
        return float(match.group(1)) * _UNITS[match.group(2)]
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _argv(value: Any) -> Any:
    return split_command(value) if isinstance(value, str) else value


def _env_names(value: list[str]) -> list[str]:
    for name in value:
        if not _ENV_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not an environment variable name")
    return value


# Every duration has a ceiling: a lease or timeout past it would overflow a clock (a
# manifest lease of 1e23 s once crashed the heartbeat thread).
MAX_TIMEOUT_S = 7 * 86400.0
Seconds = Annotated[
    float, BeforeValidator(parse_duration), Field(gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)
]
LeaseSeconds = Annotated[
    float, BeforeValidator(parse_duration), Field(gt=0, le=MAX_LEASE_S, allow_inf_nan=False)
]


class Takes(StrictModel):
    """Which briefs a desk takes: any matching label, id, or glob over the id."""

    labels: list[str] = Field(default_factory=list)
    ids: list[str] = Field(default_factory=list)
    globs: list[str] = Field(default_factory=list)


class RunSpec(StrictModel):
    """The ``run`` tool's policy: allowed command prefixes, a timeout, bounded output."""

    allow: list[str]
    timeout_s: Seconds = 300.0
    max_output_bytes: Annotated[int, Field(gt=0, le=64 * 1024 * 1024)] = 64_000
    env: list[str] = Field(default_factory=list)

    @field_validator("allow")
    @classmethod
    def _check_allow(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("list at least one allowed command prefix")
        for prefix in value:
            try:
                words = split_command(prefix)
            except ValueError as exc:
                raise ValueError(f"{prefix!r} is {exc}") from None
            if not words:
                raise ValueError("an allowed command prefix must not be empty")
        return value

    @field_validator("env")
    @classmethod
    def _check_env(cls, value: list[str]) -> list[str]:
        return _env_names(value)


Toolchain = Literal["python", "node"]


class SandboxSection(StrictModel):
    """The ``sandbox:`` section: the network and paths agent-run code may reach."""

    network: Literal["none", "gateway", "host"] | None = None
    isolation: Literal["on", "off"] = "on"
    read_only: list[str] = Field(default_factory=list)
    toolchains: list[Toolchain] = Field(default_factory=lambda: list[Toolchain](["python"]))

    @field_validator("isolation", mode="before")
    @classmethod
    def _check_isolation(cls, value: Any) -> Any:
        # YAML reads a bare on/off as a boolean.
        return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value


# The model adapters a cli desk's gateway can forward to: each wire API's own.
UPSTREAM_ADAPTERS = frozenset(api.adapter for api in REGISTRY.values())


class CliSpec(StrictModel):
    """A ``cli`` desk's agent CLI: its profile, and what overrides the profile's defaults."""

    profile: str
    command: Annotated[list[str] | None, BeforeValidator(_argv)] = None
    api: ApiName | None = None  # the wire API the CLI speaks, when not its profile's
    timeout_s: Seconds = 3600.0
    # patterns of what changes from run to run in the CLI's tool output, beside the profile's
    volatile_output: list[str] = Field(default_factory=list)
    # variables and files (paths in the CLI's private HOME) the desk adds to the profile's,
    # with placeholders ({gateway_url}, {mcp_url}, {token}, ...) filled at launch
    env: dict[str, str] = Field(default_factory=dict)
    files: dict[str, str] = Field(default_factory=dict)
    # how a killed run goes on: the CLI's own resume (native) or relaunch and replay; by
    # default the profile's (its ``resume_method``)
    resume: Literal["native", "relaunch"] | None = None

    @field_validator("command")
    @classmethod
    def _check_command(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and (not value or not value[0]):
            raise ValueError("command must name a program")
        return value


class DeskManifest(StrictModel):
    """One desk definition, validated."""

    name: str
    description: str = ""
    takes: Takes = Field(default_factory=Takes)
    kind: Literal["agent", "command", "python", "cli"]
    cli: CliSpec | None = None
    model: ModelConfig | None = None
    tools: list[str] = Field(default_factory=list)
    run: RunSpec | None = None
    lease: LeaseSeconds = 300.0
    budget: BudgetSpec = Field(default_factory=BudgetSpec)
    concurrency: Annotated[int, Field(ge=1, le=1000)] = 1
    on_divergence: Literal["fail", "fork"] = "fail"
    entry: str | None = None
    command: Annotated[list[str] | None, BeforeValidator(_argv)] = None
    command_timeout_s: Seconds = 3600.0
    secrets: list[str] = Field(default_factory=list)
    system_prompt: str = ""
    compact_at: Annotated[float, Field(gt=0, le=1)] = 0.8
    approval: bool = False  # every brief waits for ``assay approve`` before ``finish``
    # What the desk pushes (docs/desks.md, "Durability"): None is the forge's default.
    durability: Literal["step", "window", "exit"] | None = None
    checkpoint_window: Seconds = 30.0
    sandbox: SandboxSection = Field(default_factory=SandboxSection)
    _source: str = PrivateAttr(default="")
    _base_dir: Path = PrivateAttr(default=Path("."))

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        try:
            return check_id(value, what="desk name")
        except BadInput as exc:
            raise ValueError(exc.message) from None

    @field_validator("tools")
    @classmethod
    def _check_tools(cls, value: list[str]) -> list[str]:
        for tool in value:
            if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.:/-]{0,127}", tool):
                raise ValueError(f"{tool!r} is not a tool name")
        if len(set(value)) != len(value):
            raise ValueError("a tool is listed twice")
        return value

    @field_validator("entry")
    @classmethod
    def _check_entry(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", value):
            raise ValueError("entry must be 'module:function'")
        return value

    @field_validator("secrets")
    @classmethod
    def _check_secrets(cls, value: list[str]) -> list[str]:
        return _env_names(value)

    @property
    def source(self) -> str:
        """The manifest file this desk was read from."""
        return self._source

    @property
    def base_dir(self) -> Path:
        """The directory relative paths in this manifest (scripts, modules) start from."""
        return self._base_dir

    def secret_names(self) -> list[str]:
        """Variables whose values must never reach a journal: ``secrets`` plus the model key."""
        names = list(self.secrets)
        key_env = getattr(self.model, "api_key_env", None)
        if isinstance(key_env, str) and key_env not in names:
            names.append(key_env)
        for name in getattr(self.model, "env", None) or []:
            if name not in names:
                names.append(name)
        return names

    def secret_values(self) -> list[str]:
        """The current values of ``secret_names()`` (for the runtime's redaction)."""
        return [os.environ[n] for n in self.secret_names() if os.environ.get(n)]

    def takes_brief(self, brief: Brief) -> bool:
        """Whether this desk may take ``brief``.

        A brief naming a ``desk`` goes to that desk only; otherwise any shared label,
        a listed id, or a glob matching the id is enough.
        """
        if brief.desk is not None:
            return brief.desk == self.name
        if set(self.takes.labels) & set(brief.labels):
            return True
        if brief.id in self.takes.ids:
            return True
        return any(fnmatchcase(brief.id, pattern) for pattern in self.takes.globs)

    def tool_policy(self) -> ToolPolicy:
        """The ``ToolBox`` policy this manifest declares."""
        run = self.run
        return ToolPolicy(
            allowed=frozenset(t for t in self.tools if t in TOOL_NAMES),  # a cli desk's others
            # are its CLI's own tools, which the gateway allows and the CLI itself runs
            run_prefixes=tuple(tuple(shlex.split(p)) for p in (run.allow if run else [])),
            run_timeout_s=run.timeout_s if run else 300.0,
            max_output_bytes=run.max_output_bytes if run else 64_000,
            env=tuple(run.env if run else ()),
            secrets=tuple(self.secrets),
            sandbox=self.sandbox_spec(),
        )

    def sandbox_spec(self) -> SandboxSpec:
        """The ``SandboxSpec`` of this desk's tools, command and agent CLI.

        ``network`` defaults to ``none`` (``gateway`` for the ``cli`` kind, which talks to
        its model through the desk's gateway only)."""
        section = self.sandbox
        default = "gateway" if str(self.kind) == "cli" else "none"
        return SandboxSpec(
            network=section.network or default,  # type: ignore[arg-type]
            isolation=section.isolation,
            read_only=tuple(self.base_dir / p for p in section.read_only),
            toolchains=tuple(section.toolchains),
        )

    def build_model(self, *, workdir: Path | None = None) -> ModelAdapter:
        """This desk's model adapter (``BadInput`` when the desk declares none)."""
        from assay.models import build_model

        if self.model is None:
            raise BadInput(f"{self.source}: model: this desk declares no model")
        script = getattr(self.model, "script", None)
        if isinstance(script, str):
            inside_desks(self.base_dir, script, field="model.script", source=self.source)
        return build_model(
            self.model, base_dir=self.base_dir, workdir=workdir, sandbox=self.sandbox_spec()
        )

    def resolve_entry(self) -> Callable[..., Any]:
        """Import a python desk's ``entry`` (its directory is searched first)."""
        if self.entry is None:
            raise BadInput(f"{self.source}: entry: this desk names no entry")
        module_name, _, function_name = self.entry.partition(":")
        base = str(self.base_dir.resolve())
        added = base not in sys.path
        if added:
            sys.path.insert(0, base)
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise BadInput(f"{self.source}: entry: cannot import {module_name!r}: {exc}") from exc
        finally:
            if added and base in sys.path:
                sys.path.remove(base)
        function = getattr(module, function_name, None)
        if not callable(function):
            raise BadInput(f"{self.source}: entry: {module_name} has no function {function_name}")
        return function  # type: ignore[no-any-return]


def inside_desks(base_dir: Path, relative: str, *, field: str, source: str) -> Path:
    """``base_dir / relative``, refused (``BadInput`` naming the field, never the file's
    contents) unless it stays inside the desks directory once symlinks are resolved."""
    root = base_dir.resolve()
    target = (root / relative).resolve()
    if PurePosixPath(relative).is_absolute() or not target.is_relative_to(root):
        raise BadInput(
            f"{source}: {field}: {relative!r} is outside the desks directory {root}",
            source=source,
            field=field,
        )
    return target


def parse_manifest(text: str, *, source: str, base_dir: Path | None = None) -> DeskManifest:
    """Parse one manifest; ``source`` (e.g. ``desks/coder.yaml``) names it in errors.

    When ``source`` ends in ``.yaml``/``.yml`` the ``name`` must equal the file's stem.
    """
    doc = load_yaml(text.removeprefix("\ufeff").replace("\r\n", "\n"), source=source)
    if not isinstance(doc.data, dict):
        raise doc.bad([], "a desk manifest must be a mapping of fields")
    try:
        manifest = DeskManifest.model_validate(doc.data)
    except ValidationError as exc:
        raise validation_error(exc, doc) from None
    _check_kind(manifest, doc)
    if manifest.sandbox.isolation == "off" and manifest.sandbox.network != "host":
        raise doc.bad(
            ["sandbox", "network"],
            "isolation: off runs without a sandbox; declare network: host with it",
        )
    stem = PurePosixPath(source).name.rsplit(".", 1)
    if len(stem) == 2 and stem[1] in ("yaml", "yml") and stem[0] != manifest.name:
        raise doc.bad(["name"], f"{manifest.name!r} does not match the file name {stem[0]!r}")
    manifest._source = source
    manifest._base_dir = base_dir if base_dir is not None else Path(source).parent
    script = getattr(manifest.model, "script", None)
    if isinstance(script, str) and (PurePosixPath(script).is_absolute() or ".." in script):
        raise doc.bad(["model", "script"], "the script must be a path inside the desks directory")
    return manifest


def _check_kind(manifest: DeskManifest, doc: YamlDoc) -> None:
    kind = manifest.kind
    if kind != "cli":
        for tool in manifest.tools:  # a cli desk's tools are also its CLI's own
            if tool not in TOOL_NAMES:
                raise doc.bad(["tools"], f"unknown tool {tool!r} (known: {', '.join(TOOL_NAMES)})")
    if kind == "cli":
        _check_cli(manifest, doc)
    elif manifest.cli is not None:
        raise doc.bad(["cli"], f"only a cli desk has a cli section (this one is {kind})")
    if kind == "agent":
        if manifest.model is None:
            raise doc.bad(["model"], "an agent desk needs a model")
        if "finish" not in manifest.tools:
            raise doc.bad(["tools"], "an agent desk needs the finish tool")
    if kind == "python" and manifest.entry is None:
        raise doc.bad(["entry"], "a python desk needs entry: module:function")
    if kind != "python" and manifest.entry is not None:
        raise doc.bad(["entry"], f"only a python desk has an entry (this one is {kind})")
    if kind == "command" and not manifest.command:
        raise doc.bad(["command"], "a command desk needs a command")
    if kind != "command" and manifest.command is not None:
        raise doc.bad(["command"], f"only a command desk has a command (this one is {kind})")
    if "run" in manifest.tools and manifest.run is None:
        raise doc.bad(["run"], "the run tool needs a run section listing allowed command prefixes")
    if "run" not in manifest.tools and manifest.run is not None:
        raise doc.bad(["run"], "a run section without the run tool in tools")


def _check_cli(manifest: DeskManifest, doc: YamlDoc) -> None:
    if manifest.cli is None:
        raise doc.bad(["kind"], "a cli desk needs a cli section naming its profile")
    if manifest.model is None or manifest.model.adapter not in UPSTREAM_ADAPTERS:
        raise doc.bad(
            ["model"], "a cli desk needs an openai, anthropic or gemini model (its upstream)"
        )
    try:
        from assay.agentcli.profiles import get_profile
    except ImportError:
        raise doc.bad(["cli", "profile"], "agent CLI profiles are not available") from None
    try:
        profile = get_profile(manifest.cli.profile)
    except BadInput as exc:
        raise doc.bad(["cli", "profile"], exc.message.removeprefix("cli.profile: ")) from None
    if manifest.cli.resume == "native" and profile.resume is None:
        raise doc.bad(
            ["cli", "resume"],
            f"the {profile.name} CLI cannot resume its own session: relaunch is its only method",
        )
    for index, pattern in enumerate(manifest.cli.volatile_output):
        try:
            profile.output_masks([pattern])
        except BadInput as exc:
            raise doc.bad(
                ["cli", "volatile_output", index], exc.message.split(": ", 1)[-1]
            ) from None
    _check_cli_launch(manifest.cli, doc)


def _check_cli_launch(cli: CliSpec, doc: YamlDoc) -> None:
    """The desk's command, variables and files as the launch will fill them: no token on a
    command line, variable names the environment takes, files inside the CLI's HOME."""
    from assay.agentcli.profiles import check_command_arg, check_env_name, check_home_path

    def refuse(loc: list[str | int], check: Callable[..., object], value: str) -> None:
        try:
            check(value, where=".".join(str(part) for part in loc[:2]))
        except BadInput as exc:  # the check's own words, at the field's line
            raise doc.bad(loc, exc.message.split(": ", 1)[-1]) from None

    for index, arg in enumerate(cli.command or []):
        refuse(["cli", "command", index], check_command_arg, arg)
    for name in cli.env:
        refuse(["cli", "env", name], check_env_name, name)
    for path in cli.files:
        refuse(["cli", "files", path], check_home_path, path)


def split_desks(directory: Path) -> tuple[dict[str, DeskManifest], dict[str, BadInput]]:
    """Every ``*.yaml``/``*.yml`` manifest directly in ``directory`` that parses, by desk
    name, and the reason for each one that does not, by file.

    One malformed manifest (or a second one of a name already taken) is reported for itself
    and does not stop the other desks; ``load_desks`` is the all-or-nothing check.
    """
    if not directory.is_dir():
        raise BadInput(f"{directory}: no such desks directory (see --desks)")
    desks: dict[str, DeskManifest] = {}
    bad: dict[str, BadInput] = {}
    for entry in sorted(directory.iterdir()):
        if not entry.is_file() or entry.suffix not in (".yaml", ".yml"):
            continue
        if entry.name.startswith((".", "_")):
            continue
        source = str(entry)
        try:
            manifest = _load_manifest(entry, directory)
        except BadInput as error:
            bad[source] = error
            continue
        if manifest.name in desks:
            bad[source] = BadInput(
                f"{source}: name: desk {manifest.name!r} is also defined by "
                f"{desks[manifest.name].source}"
            )
            continue
        desks[manifest.name] = manifest
    return desks, bad


def _load_manifest(entry: Path, directory: Path) -> DeskManifest:
    source = str(entry)
    try:
        text = entry.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{source}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise BadInput(f"{source}: cannot read: {exc.strerror or exc}") from None
    return parse_manifest(text, source=source, base_dir=directory)


def load_desks(directory: Path) -> dict[str, DeskManifest]:
    """Every manifest directly in ``directory``, by desk name; the first bad one is raised."""
    desks, bad = split_desks(directory)
    for error in bad.values():
        raise error
    return desks
