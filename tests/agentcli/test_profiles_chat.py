"""The Qwen Code, OpenCode and aider profiles: what they write into the CLI's private HOME,
what they keep off the command line, which work trees they refuse, aider's calls without
tools counted as turns, what their matching sets aside and what a resumed session's
requests get back (their real runs: tests/desks/test_cli_{qwen,opencode,aider}.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from assay.agentcli.profiles import PROFILES, QWEN_REMINDER, Launch, get_profile
from assay.agentcli.resume import RESUME_PROMPT
from assay.errors import BadInput
from assay.gateway.calls import matching_body
from assay.gateway.wire import digest

TOKEN = "assay-test-token-3e8a"
EVIL_MODEL = 'm", "permission": {"*": "allow"}, "x": "'


def launch(name: str, tmp_path: Path, **overrides: Any) -> Launch:
    options: dict[str, Any] = {
        "command": None,
        "workdir": tmp_path / "work",
        "home": tmp_path / "home",
        "gateway_url": "http://127.0.0.1:4000/",
        "token": TOKEN,
        "model": "some-model",
        "prompt": "do the brief",
        "tools": ["bash", "finish"],
        "mcp_url": "http://127.0.0.1:4000/mcp",
    }
    options.update(overrides)
    (tmp_path / "work").mkdir(exist_ok=True)
    return get_profile(name).launch(**options)


def test_qwen_code_gets_its_settings_in_home_and_the_token_in_the_environment(
    tmp_path: Path,
) -> None:
    got = launch("qwen-code", tmp_path, tools=["run_shell_command", "agent", "finish"])
    ((path, data),) = got.files.items()
    settings = json.loads(data)
    assert path == tmp_path / "home" / ".qwen" / "settings.json"
    assert got.env["OPENAI_BASE_URL"] == "http://127.0.0.1:4000/v1"
    assert got.env["OPENAI_API_KEY"] == TOKEN and TOKEN not in " ".join(got.argv)
    assert settings["security"]["auth"]["selectedType"] == "openai"
    assert settings["tools"]["core"] == ["run_shell_command", "agent", "finish"]
    denied = settings["permissions"]["deny"]
    assert "tool_search" in denied and "web_fetch" in denied and "agent" not in denied
    assert settings["disableAllHooks"] is True and settings["mcp"]["allowed"] == ["assay"]
    assert not any(settings["memory"].values())  # no memory subagent calls in the background
    server = settings["mcpServers"]["assay"]
    assert server["httpUrl"].endswith("/mcp") and server["headers"]["Authorization"].endswith(TOKEN)
    assert got.argv[:3] == ["qwen", "--model=some-model", "--approval-mode=yolo"]


def test_opencode_config_holds_no_secret_and_allows_only_the_declared_tools(
    tmp_path: Path,
) -> None:
    got = launch("opencode", tmp_path, model=EVIL_MODEL)
    ((path, data),) = got.files.items()
    assert path == tmp_path / "home" / ".config" / "opencode" / "opencode.json"
    assert TOKEN not in data.decode() and got.env["ASSAY_GATEWAY_TOKEN"] == TOKEN
    config = json.loads(data)  # a model name is a JSON string: it adds no key
    assert config["permission"] == {
        "*": "deny",
        "bash": "allow",
        "finish": "allow",
        "assay_*": "allow",
    }
    provider = config["provider"]["assay"]
    assert provider["npm"] == "@ai-sdk/openai-compatible"
    assert provider["options"] == {
        "baseURL": "http://127.0.0.1:4000/v1",
        "apiKey": "{env:ASSAY_GATEWAY_TOKEN}",
    }
    assert config["model"] == config["small_model"] == f"assay/{EVIL_MODEL}"
    assert config["mcp"]["assay"]["headers"] == {
        "Authorization": "Bearer {env:ASSAY_GATEWAY_TOKEN}"
    }
    assert got.env["OPENCODE_DISABLE_PROJECT_CONFIG"] == "true"  # no branch opencode.json
    assert got.argv == ["opencode", "run", "--", "do the brief"]


def test_aider_runs_without_git_shell_or_network_and_keeps_its_files_in_home(
    tmp_path: Path,
) -> None:
    got = launch("aider", tmp_path, mcp_url=None)
    home = tmp_path / "home"
    assert got.argv[0] == "aider" and got.argv[-1] == "--message=do the brief"
    for option in ("--yes-always", "--no-git", "--no-suggest-shell-commands", "--no-detect-urls"):
        assert option in got.argv
    assert f"--chat-history-file={home / '.aider.chat.history.md'}" in got.argv
    assert f"--env-file={home / '.env'}" in got.argv  # not the work tree's
    assert "--model=openai/some-model" in got.argv and TOKEN not in " ".join(got.argv)
    assert got.env["OPENAI_API_KEY"] == TOKEN and got.env["AIDER_ANALYTICS"] == "false"
    ((path, data),) = got.files.items()
    assert path == home / ".aider.model.metadata.json" and "openai/some-model" in json.loads(data)
    assert not PROFILES["aider"].mcp and PROFILES["aider"].toolless_turns


@pytest.mark.parametrize(
    ("profile", "name"),
    [
        ("qwen-code", ".qwen/settings.json"),
        ("aider", ".aider.conf.yml"),
        ("aider", ".env"),
        ("aider", ".aider.model.settings.yml"),
    ],
)
def test_a_work_tree_that_configures_the_cli_is_refused_unless_the_desk_opts_in(
    tmp_path: Path, profile: str, name: str
) -> None:
    # aider reads its .env from the work tree over its own (a base URL, AIDER_LINT_CMD);
    # Qwen Code reads a trusted folder's settings over the user's (hooks, MCP servers).
    work = tmp_path / "work"
    (work / name).parent.mkdir(parents=True)
    (work / name).write_text("AIDER_LINT_CMD=touch pwned\n")
    with pytest.raises(BadInput, match=rf"{name}: the work tree configures"):
        launch(profile, tmp_path)
    own = launch(profile, tmp_path, command=[profile, "{prompt}"])
    assert own.argv[0] == profile


def test_aiders_test_output_is_matched_without_its_run_time_or_temporary_paths() -> None:
    aider = PROFILES["aider"]

    def body(report: str) -> dict[str, Any]:
        return {
            "model": "m",
            "messages": [
                {"role": "user", "content": "# Brief b"},
                {"role": "user", "content": report},
            ],
        }

    one = "I ran this command:\n\nx\n\nAnd got this output:\n\nAssertionError: /tmp/tmpab3_x9zq\n"
    two = one.replace("tmpab3_x9zq", "tmpzz9_k2m1")
    keys = {
        digest("/r", matching_body(aider.api, body(t), extra=aider.normalise)) for t in (one, two)
    }
    assert len(keys) == 1
    other = one.replace("AssertionError", "OK")
    assert digest("/r", matching_body(aider.api, body(other), extra=aider.normalise)) not in keys


def test_qwen_codes_git_snapshot_is_set_aside_whether_or_not_a_section_follows_it() -> None:
    qwen = PROFILES["qwen-code"]
    snapshot = "\n\nGit snapshot at conversation start. Stale.\n```text\ngit: Status: (clean)\n```"

    def matched(system: str) -> str:
        body = {"messages": [{"role": "system", "content": system}]}
        return digest("/r", matching_body(qwen.api, body, extra=qwen.normalise))

    for after in ("", "\n\n## MEMORY.md\n\nempty"):  # its last section, or one follows
        assert matched(f"base ---{snapshot}{after}") == matched(f"base ---{after}")
    assert matched("base ---") != matched("base --- and more")


def test_a_resumed_qwen_code_request_has_its_date_reminder_where_the_first_process_had_it() -> None:
    reminder = {"type": "text", "text": f"{QWEN_REMINDER}Monday.\n</system-reminder>"}
    brief = {"type": "text", "text": "# Brief b"}
    context = {"type": "text", "text": "<system-reminder>\nstartup context\n</system-reminder>"}
    result = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    call = {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function"}]}
    resumed = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": [context, brief]},  # rebuilt from its chat: no reminder
            call,
            result,
            {"role": "user", "content": [reminder, {"type": "text", "text": RESUME_PROMPT}]},
        ],
    }
    got = PROFILES["qwen-code"].resumed_request("openai-chat", resumed)
    assert got["messages"] == [
        {"role": "system", "content": "s"},
        {"role": "user", "content": [context, reminder, brief]},  # as the first process sent it
        call,
        result,
    ]
    assert resumed["messages"][1]["content"] == [context, brief]  # the request is not changed


def test_a_resumed_opencode_request_loses_its_quoted_resume_prompt() -> None:
    messages = [
        {"role": "user", "content": '"# Brief b"'},
        {"role": "user", "content": json.dumps(RESUME_PROMPT)},  # `run` quotes it
    ]
    got = PROFILES["opencode"].resumed_request("openai-chat", {"messages": messages})
    assert got["messages"] == messages[:1]
