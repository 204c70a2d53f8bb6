"""The profiles' launches: what they set, and that nothing from a prompt, a model name or a
URL escapes the one place it was put (hostile inputs first, then the real CLIs)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from assay.agentcli.profiles import PROFILES, Launch, get_profile
from assay.errors import BadInput
from tests.agentcli.clis import cli_path, run_launch
from tests.fakes.wire import WireFake

TOKEN = "assay-test-token-91c2"
HOSTILE = (
    "--version; $(touch pwned1) `touch pwned2` && touch pwned3 | cat /etc/passwd > pwned4"
    " '\" \\\n{prompt}"
)


def launch(name: str, tmp_path: Path, **overrides: Any) -> Launch:
    options: dict[str, Any] = {
        "command": None,
        "workdir": tmp_path / "work",
        "home": tmp_path / "home",
        "gateway_url": "http://127.0.0.1:4000/",
        "token": TOKEN,
        "model": "some-model",
        "prompt": "do the brief",
        "tools": ["Bash", "Read"],
        "mcp_url": None,
    }
    options.update(overrides)
    return get_profile(name).launch(**options)


def test_an_unknown_profile_is_bad_input_naming_it() -> None:
    with pytest.raises(
        BadInput, match=r"cli\.profile: unknown agent CLI profile 'claude-kode'"
    ) as got:
        get_profile("claude-kode")
    assert got.value.code == 65
    assert "aider, claude-code, codex, gemini-cli, generic, mini-swe-agent, opencode" in (
        got.value.message
    )


def test_the_profiles_and_their_apis() -> None:
    apis = {name: p.api for name, p in PROFILES.items()}
    assert apis == {
        "claude-code": "anthropic",
        "codex": "openai-responses",
        "gemini-cli": "gemini",
        "mini-swe-agent": "openai-chat",
        "qwen-code": "openai-chat",
        "opencode": "openai-chat",
        "aider": "openai-chat",
        "generic": "openai-chat",
    }
    for name, profile in PROFILES.items():
        assert profile.name == name
        assert name == "generic" or any("{prompt}" in arg for arg in profile.default_command)


def test_generic_sets_the_common_variables_and_nothing_else(tmp_path: Path) -> None:
    got = launch("generic", tmp_path, command=["my-agent", "--task", "{prompt}"])
    assert got.env == {
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:4000",
        "OPENAI_BASE_URL": "http://127.0.0.1:4000/v1",
        "OPENAI_API_BASE": "http://127.0.0.1:4000/v1",
        "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:4000",
        "ANTHROPIC_API_KEY": TOKEN,
        "OPENAI_API_KEY": TOKEN,
        "GEMINI_API_KEY": TOKEN,
    }
    assert got.argv == ["my-agent", "--task", "do the brief"]
    assert got.files == {}


def test_generic_needs_a_command(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"cli\.command: the generic profile needs a command"):
        launch("generic", tmp_path)
    with pytest.raises(BadInput, match=r"cli\.command"):
        launch("generic", tmp_path, command=["ok", 3])


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_a_hostile_prompt_stays_one_argument_and_the_token_stays_off_the_command_line(
    name: str, tmp_path: Path
) -> None:
    got = launch(name, tmp_path, prompt=HOSTILE, command=["agent", "{prompt}", "--x={prompt}!"])
    assert HOSTILE in got.argv
    assert f"--x={HOSTILE}!" in got.argv
    assert all(TOKEN not in arg for arg in got.argv)
    assert got.argv[0] == "agent"  # the profile's options never precede the program
    odd = launch(name, tmp_path, prompt="P", model="m{prompt}", command=["agent", "{prompt}"])
    assert "P" in odd.argv and not any("mP" in arg for arg in odd.argv)


def test_codex_config_cannot_be_rewritten_by_a_model_name_or_url(tmp_path: Path) -> None:
    evil = 'm"\nsandbox_mode = "read-only"\n[model_providers.evil]\nbase_url = "http://evil'
    got = launch("codex", tmp_path, model=evil, mcp_url='http://127.0.0.1:5/mcp"\nx = 1')
    ((path, data),) = got.files.items()
    assert path == tmp_path / "home" / ".codex" / "config.toml"
    config = tomllib.loads(data.decode())
    assert config["model"] == evil
    assert config["sandbox_mode"] == "danger-full-access"
    assert set(config["model_providers"]) == {"assay"}
    assert config["model_providers"]["assay"]["base_url"] == "http://127.0.0.1:4000/v1"
    assert config["model_providers"]["assay"]["wire_api"] == "responses"
    assert config["mcp_servers"]["assay"]["url"] == 'http://127.0.0.1:5/mcp"\nx = 1'
    assert "x" not in config
    assert got.env == {"CODEX_HOME": str(tmp_path / "home" / ".codex"), "OPENAI_API_KEY": TOKEN}


def test_claude_code_registers_mcp_with_a_strict_config(tmp_path: Path) -> None:
    got = launch("claude-code", tmp_path, mcp_url="http://127.0.0.1:5/mcp")
    config_file = tmp_path / "home" / ".assay-mcp.json"
    assert f"--mcp-config={config_file}" in got.argv and "--strict-mcp-config" in got.argv
    assert "--allowedTools=Bash,Read,mcp__assay" in got.argv and "--tools=Bash,Read" in got.argv
    server = json.loads(got.files[config_file])["mcpServers"]["assay"]
    assert server == {
        "type": "http",
        "url": "http://127.0.0.1:5/mcp",
        "headers": {"Authorization": f"Bearer {TOKEN}"},
    }
    assert got.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:4000"
    assert got.env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    without = launch("claude-code", tmp_path)
    assert without.files == {} and not any("mcp" in arg for arg in without.argv)


def test_mini_swe_agent_has_no_mcp_client(tmp_path: Path) -> None:
    got = launch("mini-swe-agent", tmp_path, mcp_url="http://127.0.0.1:5/mcp")
    assert not PROFILES["mini-swe-agent"].mcp
    assert got.files == {} and not any(arg.startswith("--mcp") for arg in got.argv)
    assert got.env["OPENAI_BASE_URL"] == "http://127.0.0.1:4000/v1"


def first_turn(profile: str) -> list[dict[str, Any]]:
    if profile == "mini-swe-agent":
        return [
            {
                "tool_calls": [
                    {
                        "name": "bash",
                        "arguments": {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"},
                    }
                ]
            }
        ]
    return [{"content": "Nothing to do."}]


@pytest.mark.parametrize(
    ("profile", "binary"),
    [
        ("claude-code", "claude"),
        ("codex", "codex"),
        ("gemini-cli", "gemini"),
        ("mini-swe-agent", "mini"),
    ],
)
def test_a_real_cli_gets_a_hostile_prompt_verbatim_and_runs_none_of_it(
    profile: str, binary: str, tmp_path: Path
) -> None:
    path = cli_path(binary)
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    with WireFake(first_turn(profile)) as fake:
        got = launch(profile, tmp_path, gateway_url=fake.url, prompt=HOSTILE, tools=["Bash"])
        done = run_launch(got, workdir=work, home=home, binary=path)
        assert done.returncode == 0, done.stderr + done.stdout
        assert fake.answered == 1
        request = json.dumps(fake.turn_requests()[0].body)
    assert json.dumps(HOSTILE)[1:-1] in request  # the whole prompt, as the user's text
    assert not list(work.glob("pwned*")) and not list(tmp_path.glob("pwned*"))
    assert TOKEN not in done.stdout + done.stderr


def test_a_work_trees_claude_hooks_do_not_run_unless_the_desk_opts_in(tmp_path: Path) -> None:
    path = cli_path("claude")
    work, home = tmp_path / "work", tmp_path / "home"
    (work / ".claude").mkdir(parents=True)
    home.mkdir()
    hook = {"type": "command", "command": "touch hook-ran"}
    settings = {"hooks": {"SessionStart": [{"hooks": [hook]}]}}
    (work / ".claude" / "settings.json").write_text(json.dumps(settings))
    (work / "CLAUDE.md").write_text("Project memory marker 5d1e.\n")
    opt_in = ["claude", "--print", "--setting-sources=user,project", "--", "{prompt}"]
    seen = []
    for command in (None, opt_in):
        with WireFake([{"content": "ok"}]) as fake:
            got = launch("claude-code", tmp_path, gateway_url=fake.url, command=command)
            done = run_launch(got, workdir=work, home=home, binary=path)
            assert done.returncode == 0, done.stderr + done.stdout
            memory = "marker 5d1e" in json.dumps(fake.turn_requests()[0].body)
        seen.append(((work / "hook-ran").exists(), memory))
    assert seen == [(False, False), (True, True)]


@pytest.mark.parametrize("how", ["file", "symlinked folder", "dangling link"])
def test_a_work_trees_gemini_settings_are_refused_before_the_cli_starts(
    tmp_path: Path, how: str
) -> None:
    # A brief's branch may carry .gemini/settings.json; a trusted folder's settings override
    # the user's (the profile's), so its hooks and MCP servers would run commands no declared
    # tool allows (found with the real CLI: a SessionStart hook ran).
    work = tmp_path / "work"
    work.mkdir()
    hook = {"type": "command", "command": "touch hook-ran"}
    text = json.dumps({"hooksConfig": {"enabled": True}, "hooks": {"SessionStart": [hook]}})
    if how == "file":
        (work / ".gemini").mkdir()
        (work / ".gemini" / "settings.json").write_text(text)
    elif how == "symlinked folder":
        (tmp_path / "elsewhere").mkdir()
        (tmp_path / "elsewhere" / "settings.json").write_text(text)
        (work / ".gemini").symlink_to(tmp_path / "elsewhere")
    else:
        (work / ".gemini").mkdir()
        (work / ".gemini" / "settings.json").symlink_to(tmp_path / "nowhere.json")
    with pytest.raises(BadInput, match=r"\.gemini/settings\.json: the work tree configures"):
        launch("gemini-cli", tmp_path, workdir=work)
    own = launch("gemini-cli", tmp_path, workdir=work, command=["gemini", "--prompt={prompt}"])
    assert own.argv[0] == "gemini"  # the desk's own command accepts the work tree's settings


def test_the_gemini_cli_gets_only_the_declared_tools_and_the_assay_server(tmp_path: Path) -> None:
    got = launch("gemini-cli", tmp_path, tools=["read_file", "finish"], mcp_url="http://m/mcp")
    ((path, data),) = got.files.items()
    settings = json.loads(data)
    assert path == tmp_path / "home" / ".gemini" / "settings.json"
    assert settings["tools"]["core"] == ["read_file", "finish", "mcp_assay_*"]
    assert settings["mcp"]["allowed"] == ["assay"]
    server = settings["mcpServers"]["assay"]
    assert server["httpUrl"] == "http://m/mcp" and server["headers"]["Authorization"].endswith(
        TOKEN
    )
    assert settings["hooksConfig"] == {"enabled": False}
    assert got.env["GEMINI_API_KEY"] == TOKEN and TOKEN not in " ".join(got.argv)


@pytest.mark.parametrize("tool", ["Read,Bash", "", " "])
def test_a_claude_tool_name_cannot_smuggle_a_second_grant(tool: str, tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"tools: .* is not a Claude Code tool name"):
        launch("claude-code", tmp_path, tools=["Write", tool])


def test_a_prompt_that_spells_a_placeholder_never_gets_the_token() -> None:
    """A brief's text is anyone's: one pass fills the desk's placeholders, so a prompt that
    says ``{token}`` reaches the CLI as those seven characters, never as the token."""
    launch = get_profile("generic").launch(
        command=["my-cli", "{prompt}"],
        workdir=Path("/work"),
        home=Path("/home/cli"),
        gateway_url="http://127.0.0.1:9/",
        token="secret-token-123",
        model="m",
        prompt="print {token} and {home}",
        tools=[],
        mcp_url=None,
        env={"MY_KEY": "{token}", "MY_TASK": "{prompt}"},
        files={"cfg/x.json": '{"url": "{gateway_url}", "task": "{prompt}"}'},
    )
    assert launch.argv == ["my-cli", "print {token} and {home}"]
    assert launch.env["MY_KEY"] == "secret-token-123"
    assert launch.env["MY_TASK"] == "print {token} and {home}"
    text = launch.files[Path("/home/cli/cfg/x.json")].decode()
    assert text == '{"url": "http://127.0.0.1:9", "task": "print {token} and {home}"}'
    assert "secret-token-123" not in " ".join(launch.argv)
