"""``kind: cli`` manifests: the cli section, the upstream, tools naming the CLI's own."""

from __future__ import annotations

import pytest

from assay.desks import parse_manifest
from assay.errors import BadInput

CLI = """\
name: claude
kind: cli
cli:
  profile: claude-code
  timeout_s: 10m
model: {adapter: anthropic, model: claude-sonnet-4-5, api_key_env: ANTHROPIC_API_KEY}
tools: [Bash, Read, Write, mcp__assay__finish, finish]
budget: {model_calls: 40, usd: 2.0}
"""


def bad(text: str) -> str:
    with pytest.raises(BadInput) as caught:
        parse_manifest(text, source="desks/claude.yaml")
    assert caught.value.code == 65
    return caught.value.message


def test_a_cli_manifest_parses_with_the_cli_s_own_tool_names() -> None:
    desk = parse_manifest(CLI, source="desks/claude.yaml")
    assert desk.kind == "cli" and desk.cli is not None
    assert desk.cli.profile == "claude-code" and desk.cli.timeout_s == 600
    assert desk.cli.command is None
    assert desk.tool_policy().allowed == frozenset({"finish"})  # only Assay's go to the ToolBox


def test_a_cli_command_may_be_one_string_split_without_a_shell() -> None:
    desk = parse_manifest(
        CLI.replace("  timeout_s: 10m", "  command: claude -p '{prompt}' --output-format json"),
        source="desks/claude.yaml",
    )
    assert desk.cli is not None
    assert desk.cli.command == ["claude", "-p", "{prompt}", "--output-format", "json"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            ("profile: claude-code", "profile: teleporter"),
            "line 4: cli.profile: unknown agent CLI profile 'teleporter'",
        ),
        (("adapter: anthropic", "adapter: scripted, script: s.yaml, x"), "model"),
        (("tools: [Bash,", "tools: ['rm -rf /',"), "tools"),
        (("  timeout_s: 10m", "  timeout_s: 0"), "cli.timeout_s"),
        (("  timeout_s: 10m", "  command: []"), "cli.command"),
        (("  timeout_s: 10m", "  api: soap"), "cli.api"),
        (("  timeout_s: 10m", "  extra: 1"), "cli.extra"),
    ],
)
def test_bad_cli_manifests_name_the_field(change: tuple[str, str], expected: str) -> None:
    old, new = change
    assert old in CLI
    message = bad(CLI.replace(old, new))
    assert "desks/claude.yaml" in message
    assert expected in message


def test_a_cli_desk_needs_its_section_and_an_http_model() -> None:
    no_section = "\n".join(line for line in CLI.splitlines() if not line.startswith(("cli:", "  ")))
    assert "needs a cli section" in bad(no_section)
    scripted = CLI.replace(
        "{adapter: anthropic, model: claude-sonnet-4-5, api_key_env: ANTHROPIC_API_KEY}",
        "{adapter: scripted, script: s.yaml}",
    )
    assert "needs an openai, anthropic or gemini model" in bad(scripted)


def test_a_gemini_cli_desk_and_a_gemini_agent_desk_parse() -> None:
    gemini = CLI.replace("profile: claude-code", "profile: gemini-cli\n  api: gemini").replace(
        "{adapter: anthropic, model: claude-sonnet-4-5, api_key_env: ANTHROPIC_API_KEY}",
        "{adapter: gemini, model: gemini-2.5-pro, base_url: 'http://127.0.0.1:9/'}",
    )
    desk = parse_manifest(gemini, source="desks/claude.yaml")
    assert desk.cli is not None and desk.cli.api == "gemini"
    assert desk.model is not None and desk.model.adapter == "gemini"
    assert desk.model.api_key_env == "GEMINI_API_KEY"
    agent = """\
name: coder
kind: agent
model: {adapter: gemini, model: gemini-2.5-pro}
tools: [read_file, finish]
"""
    coder = parse_manifest(agent, source="desks/coder.yaml")
    assert coder.model is not None and coder.model.adapter == "gemini"


def test_other_kinds_still_refuse_unknown_tools() -> None:
    text = """\
name: coder
kind: agent
model: {adapter: scripted, script: s.yaml}
tools: [Bash, finish]
"""
    with pytest.raises(BadInput) as caught:
        parse_manifest(text, source="desks/coder.yaml")
    assert "unknown tool 'Bash'" in caught.value.message


def test_only_a_cli_desk_has_a_cli_section() -> None:
    text = CLI.replace("kind: cli", "kind: agent").replace(
        "[Bash, Read, Write, mcp__assay__finish, finish]", "[finish]"
    )
    message = bad(text)
    assert "line 3: cli: only a cli desk has a cli section (this one is agent)" in message
