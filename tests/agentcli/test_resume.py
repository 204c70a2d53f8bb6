"""Native resume as each profile declares it: how a resumed CLI is launched, and what of
its requests the gateway takes out (what the CLI added because it resumed), on the shapes
the real CLIs send (seen in tests/desks/test_cli_resume.py's runs). Offline, no process."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from assay.agentcli.profiles import PROFILES, Launch, get_profile
from assay.agentcli.resume import RESUME_PROMPT, NativeResume, without_resume
from assay.errors import BadInput
from assay.gateway.calls import matching_body
from assay.gateway.wire import digest

CC = {"type": "ephemeral"}
FILLER = "No response requested."


def launch(
    profile: str, *, resumed: bool, session: str = "", command: list[str] | None = None
) -> Launch:
    return get_profile(profile).launch(
        command=command,
        workdir=Path("/w"),
        home=Path("/h"),
        gateway_url="http://127.0.0.1:9",
        token="tok-3b1e9f",
        model="m",
        prompt="Fix the bug.",
        tools=["Bash"],
        mcp_url=None,
        session=session,
        resumed=resumed,
    )


def test_each_profile_says_how_a_killed_run_goes_on() -> None:
    methods = {name: profile.resume_method for name, profile in PROFILES.items()}
    assert methods["claude-code"] == methods["codex"] == methods["gemini-cli"] == "native"
    assert methods["mini-swe-agent"] == methods["generic"] == "relaunch"
    with pytest.raises(BadInput, match="cannot resume its own session"):
        launch("mini-swe-agent", resumed=True)


def test_the_resume_arguments_go_before_the_prompt_and_the_prompt_is_the_resume_prompt() -> None:
    first = launch("claude-code", resumed=False, session="5cfc9e22-5715-50f4-8eef-1dc3e22ac9a7")
    assert "--session-id=5cfc9e22-5715-50f4-8eef-1dc3e22ac9a7" in first.argv
    assert first.argv[-2:] == ["--", "Fix the bug."]
    again = launch("claude-code", resumed=True, session="5cfc9e22-5715-50f4-8eef-1dc3e22ac9a7")
    assert again.argv[-3:] == ["--resume=5cfc9e22-5715-50f4-8eef-1dc3e22ac9a7", "--", RESUME_PROMPT]
    assert not any(arg.startswith("--session-id") for arg in again.argv)
    # the text Claude Code adds to an interrupted turn is the resume prompt too
    assert again.env["CLAUDE_CODE_RESUME_PROMPT"] == RESUME_PROMPT
    assert "Fix the bug." not in " ".join(again.argv)

    codex = launch("codex", resumed=True)
    assert codex.argv[:2] == ["codex", "exec"]
    assert codex.argv[-4:] == ["resume", "--last", "--", RESUME_PROMPT]
    gemini = launch("gemini-cli", resumed=True)
    assert gemini.argv[-2:] == ["--resume=latest", f"--prompt={RESUME_PROMPT}"]
    # a desk's own command is resumed the same way
    own = launch("codex", resumed=True, command=["codex", "exec", "--json", "--", "{prompt}"])
    assert own.argv == ["codex", "exec", "--json", "resume", "--last", "--", RESUME_PROMPT]


def test_a_new_profile_declares_its_resume_in_a_few_lines() -> None:
    resume = NativeResume(files=(".qwen/tmp/*/chats/*.json",), again=("--resume={session}",))
    argv = resume.arguments(["qwen", "-p", "{prompt}"], session="s1", resumed=True)
    assert argv == ["qwen", "--resume=s1", "-p", "{prompt}"]
    assert resume.arguments(["qwen", "{prompt}"], session="s1", resumed=False) == [
        "qwen",
        "{prompt}",
    ]
    opencode = NativeResume(files=(".local/share/opencode/**",), again=("--session", "{session}"))
    assert opencode.arguments(["opencode", "run", "--", "{prompt}"], session="x", resumed=True) == [
        "opencode",
        "run",
        "--session",
        "x",
        "--",
        "{prompt}",
    ]


# ---------------------------------------------------------------- what is taken out


def claude_messages(*, resumed: bool, note: bool = False) -> list[dict[str, Any]]:
    """A Claude Code conversation as sent: one tool call, its result last (marked for the
    cache); resumed, as Claude Code sends it on ``--resume`` with the resume prompt."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "Fix the bug."}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}],
        },
    ]
    if not resumed:
        messages[-1]["content"][-1]["cache_control"] = CC
        return messages
    messages[-1]["content"].append({"type": "text", "text": RESUME_PROMPT})  # its interrupted turn
    messages.append({"role": "assistant", "content": [{"type": "text", "text": FILLER}]})
    last: list[dict[str, Any]] = [{"type": "text", "text": RESUME_PROMPT, "cache_control": CC}]
    if note:  # files it read changed since: a note attached to the new turn
        last.insert(
            0, {"type": "text", "text": "<system-reminder>log.txt was modified</system-reminder>"}
        )
    messages.append({"role": "user", "content": last})
    return messages


@pytest.mark.parametrize("note", [False, True])
def test_claude_codes_resume_turns_come_out_and_its_cache_mark_goes_back(note: bool) -> None:
    profile = get_profile("claude-code")
    body = {
        "model": "m",
        "tools": [{"name": "Bash"}],
        "messages": claude_messages(resumed=True, note=note),
    }
    sent = copy.deepcopy(body)
    live = {"model": "m", "tools": [{"name": "Bash"}], "messages": claude_messages(resumed=False)}
    assert profile.resumed_request("anthropic", body) == live
    assert body == sent  # the CLI's request itself is left as it was

    def key(b: dict[str, Any]) -> str:
        return digest("/v1/messages", matching_body("anthropic", b, extra=profile.normalise))

    assert key(profile.resumed_request("anthropic", body)) == key(live)  # matched, not diverged


def test_the_turns_of_the_resume_stay_out_of_every_later_request() -> None:
    profile = get_profile("claude-code")
    later = claude_messages(resumed=True)
    later[-1]["content"][-1].pop("cache_control")  # only the last message is marked
    later += [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "ok",
                    "cache_control": CC,
                }
            ],
        },
    ]
    kept = profile.resumed_request("anthropic", {"messages": later})["messages"]
    texts = [b.get("text") for m in kept for b in m["content"]]
    assert RESUME_PROMPT not in texts and FILLER not in texts
    assert [m["role"] for m in kept] == ["user", "assistant", "user", "assistant", "user"]
    assert [("cache_control" in b) for m in kept for b in m["content"]] == [False] * 4 + [True]


def test_a_real_turn_that_says_what_a_filler_says_is_kept() -> None:
    # the filler goes only when the resume prompt follows it
    said = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": FILLER}]},
        {"role": "user", "content": "go on"},
    ]
    assert without_resume(said, fillers=[FILLER], markers=["cache_control"]) == said


def test_codexs_resume_prompt_comes_out_of_its_input_items() -> None:
    profile = get_profile("codex")
    items = [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Fix the bug."}],
        },
        {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    ]
    resumed = [
        *items,
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": RESUME_PROMPT}],
        },
    ]
    assert profile.resumed_request("openai-responses", {"input": resumed}) == {"input": items}


def test_the_gemini_clis_rebuilt_chat_is_repaired() -> None:
    """The Gemini CLI's resumed chat holds each tool result twice and no thought signature
    on the calls of the current loop; the placeholder turn and the prompt come out."""
    profile = get_profile("gemini-cli")
    call = {"functionCall": {"id": "run_1", "name": "run_shell_command", "args": {"command": "ls"}}}
    result = {
        "functionResponse": {
            "id": "run_1",
            "name": "run_shell_command",
            "response": {"output": "a"},
        }
    }
    live = [
        {"role": "user", "parts": [{"text": "Fix the bug."}]},
        {
            "role": "model",
            "parts": [
                {"text": "Looking."},
                {**call, "thoughtSignature": "skip_thought_signature_validator"},
            ],
        },
        {"role": "user", "parts": [result]},
    ]
    resumed = [
        live[0],
        {"role": "model", "parts": [{"text": "Looking."}, call]},
        {"role": "user", "parts": [result, result]},
        {
            "role": "model",
            "parts": [{"text": "[The previous response was interrupted before it completed.]"}],
        },
        {"role": "user", "parts": [{"text": RESUME_PROMPT}]},
    ]
    assert profile.resumed_request("gemini", {"contents": resumed}) == {"contents": live}


def test_a_desk_may_keep_a_native_cli_on_relaunch_and_may_not_ask_a_relaunch_cli_for_native(
    tmp_path: Path,
) -> None:
    from assay.desks import load_desks
    from assay.desks.kinds.cli import cli_profile

    def desk(profile: str, resume: str) -> str:
        return (
            f"name: d\nkind: cli\ncli:\n  profile: {profile}\n  resume: {resume}\n"
            "model: {adapter: openai, model: m, api_key_env: K}\n"
        )

    (tmp_path / "d.yaml").write_text(desk("codex", "relaunch"), encoding="utf-8")
    assert cli_profile(load_desks(tmp_path)["d"]).resume_method == "relaunch"
    (tmp_path / "d.yaml").write_text(desk("mini-swe-agent", "native"), encoding="utf-8")
    with pytest.raises(
        BadInput, match=r"d\.yaml line 5: cli\.resume: the mini-swe-agent CLI cannot resume"
    ):
        load_desks(tmp_path)
