"""Each real agent CLI, launched by its profile, completes a scripted multi-call session
against the scripted upstream directly (no gateway): it writes files, runs commands, sends
their results back, and ends on the script's final turn. Offline, as whoever runs the
tests (root in CI)."""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from assay.agentcli.profiles import Launch, get_profile
from tests.agentcli.clis import cli_path, profile_launch, run_launch, work_and_home
from tests.fakes.wire import Seen, WireFake

TOKEN = "assay-test-token-7f3e"


def sent(body: dict[str, Any], text: str) -> bool:
    """Whether a request's conversation holds ``text`` in some string, looking inside
    strings that are JSON themselves (mini-swe-agent sends tool output as a JSON object)."""

    def strings(value: Any) -> Any:
        if isinstance(value, str):
            yield value
            with contextlib.suppress(ValueError):
                yield from strings(json.loads(value))
        elif isinstance(value, dict):
            for item in value.values():
                yield from strings(item)
        elif isinstance(value, list):
            for item in value:
                yield from strings(item)

    conversation = body.get("messages") or body.get("input") or body.get("contents")
    return any(text in s for s in strings(conversation))


def claude_script(work: Path) -> list[dict[str, Any]]:
    hello = str(work / "hello.py")
    return [
        {
            "content": "Writing the script.",
            "tool_calls": [
                {"name": "Write", "arguments": {"file_path": hello, "content": "print('hello')\n"}}
            ],
        },
        {
            "tool_calls": [
                {
                    "name": "Bash",
                    "arguments": {
                        "command": "python3 hello.py > out.txt && echo first-run-ok",
                        "description": "run",
                    },
                }
            ]
        },
        {"tool_calls": [{"name": "Read", "arguments": {"file_path": str(work / "out.txt")}}]},
        {
            "tool_calls": [
                {
                    "name": "Edit",
                    "arguments": {"file_path": hello, "old_string": "hello", "new_string": "bye"},
                }
            ]
        },
        {
            "tool_calls": [
                {
                    "name": "Bash",
                    "arguments": {
                        "command": "python3 hello.py >> out.txt && cat out.txt",
                        "description": "rerun",
                    },
                }
            ]
        },
        {"content": "Done: hello.py prints bye."},
    ]


def test_claude_code_runs_a_scripted_session(tmp_path: Path) -> None:
    done, turns = run_session("claude-code", tmp_path, api="anthropic")
    assert json.loads(done.stdout)["result"] == "Done: hello.py prints bye."
    assert all(t.stream and t.headers["x-api-key"] == TOKEN for t in turns)
    offered = {tool["name"] for tool in turns[0].body["tools"]}
    assert offered == {"Bash", "Read", "Write", "Edit"}


def codex_script() -> list[dict[str, Any]]:
    def sh(cmd: str) -> dict[str, Any]:
        return {"name": "exec_command", "arguments": {"cmd": cmd}}

    return [
        {
            "content": "Writing the script.",
            "tool_calls": [sh("printf \"print('hello')\\n\" > hello.py")],
        },
        {"tool_calls": [sh("python3 hello.py > out.txt && echo first-run-ok")]},
        {"tool_calls": [sh("sed -i s/hello/bye/ hello.py")]},
        {"tool_calls": [sh("python3 hello.py >> out.txt")]},
        {"tool_calls": [sh("cat out.txt")]},
        {"content": "Done: hello.py prints bye."},
    ]


def test_codex_runs_a_scripted_session(tmp_path: Path) -> None:
    done, turns = run_session("codex", tmp_path, api="openai-responses")
    assert "Done: hello.py prints bye." in done.stdout
    offered = {tool.get("name") for tool in turns[0].body["tools"]}  # no sub-agents, goals
    assert offered == {"exec_command", "write_stdin", "request_user_input", "view_image"}
    assert all(t.headers["authorization"] == f"Bearer {TOKEN}" for t in turns)


def mini_script() -> list[dict[str, Any]]:
    def sh(cmd: str) -> dict[str, Any]:
        return {"name": "bash", "arguments": {"command": cmd}}

    return [
        {
            "content": "Writing the script.",
            "tool_calls": [sh("printf \"print('hello')\\n\" > hello.py")],
        },
        {
            "content": "Run it.",
            "tool_calls": [sh("python3 hello.py > out.txt && echo first-run-ok")],
        },
        {"content": "Edit.", "tool_calls": [sh("sed -i s/hello/bye/ hello.py")]},
        {"content": "Run again.", "tool_calls": [sh("python3 hello.py >> out.txt")]},
        {"content": "Check.", "tool_calls": [sh("cat out.txt")]},
        {"content": "Done.", "tool_calls": [sh("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")]},
    ]


def gemini_script() -> list[dict[str, Any]]:
    def sh(cmd: str) -> dict[str, Any]:
        return {"name": "run_shell_command", "arguments": {"command": cmd}}

    return [
        {
            "content": "Writing the script.",
            "tool_calls": [
                {
                    "name": "write_file",
                    "arguments": {"file_path": "hello.py", "content": "print('hello')\n"},
                }
            ],
        },
        {"tool_calls": [sh("python3 hello.py > out.txt && echo first-run-ok")]},
        {"tool_calls": [sh("sed -i s/hello/bye/ hello.py")]},
        {"tool_calls": [sh("python3 hello.py >> out.txt")]},
        {"tool_calls": [sh("cat out.txt")]},
        {"content": "Done: hello.py prints bye."},
    ]


def test_the_gemini_cli_runs_a_scripted_session(tmp_path: Path) -> None:
    done, turns = run_session("gemini-cli", tmp_path, api="gemini")
    assert "Done: hello.py prints bye." in done.stdout
    assert all(t.stream and t.headers["x-goog-api-key"] == TOKEN for t in turns)
    assert all(":streamGenerateContent" in t.path for t in turns)
    offered = {d["name"] for tool in turns[0].body["tools"] for d in tool["functionDeclarations"]}
    assert offered == {"run_shell_command", "write_file"}  # the declared tools only


# Each CLI's binary, model and built-in tools, and its scripted session (given the work tree).
SCRIPTED: dict[str, tuple[str, str, list[str], Callable[[Path], list[dict[str, Any]]]]] = {
    "claude-code": (
        "claude",
        "claude-sonnet-4-5",
        ["Bash", "Read", "Write", "Edit"],
        claude_script,
    ),
    "codex": ("codex", "gpt-5-codex", ["exec_command"], lambda work: codex_script()),
    "gemini-cli": (
        "gemini",
        "gemini-2.5-pro",
        ["run_shell_command", "write_file"],
        lambda work: gemini_script(),
    ),
    "mini-swe-agent": ("mini", "fake-model", ["bash"], lambda work: mini_script()),
}


def scripted_launch(
    profile: str, *, workdir: Path, home: Path, url: str, token: str = "t"
) -> Launch:
    """``profile``'s launch for its scripted session (``SCRIPTED``): make hello.py print bye."""
    _, model, tools, _ = SCRIPTED[profile]
    return profile_launch(
        profile,
        workdir=workdir,
        home=home,
        url=url,
        token=token,
        model=model,
        prompt="Make hello.py print bye.",
        tools=tools,
    )


def run_session(
    profile: str, tmp_path: Path, *, api: str
) -> tuple[subprocess.CompletedProcess[str], list[Seen]]:
    """Run ``profile``'s CLI through its scripted session and check what every CLI's
    session shows: six turns over ``api``, each command's output sent back, the files."""
    binary, _, _, script = SCRIPTED[profile]
    workdir, home = work_and_home(tmp_path)
    with WireFake(script(workdir)) as fake:
        launch = scripted_launch(profile, workdir=workdir, home=home, url=fake.url, token=TOKEN)
        done = run_launch(launch, workdir=workdir, home=home, binary=cli_path(binary))
        assert done.returncode == 0, done.stderr + done.stdout
        assert fake.answered == 6
        turns = fake.turn_requests()
        assert [t.turn for t in turns] == [0, 1, 2, 3, 4, 5]
        assert {t.api for t in turns} == {api}
        assert sent(turns[2].body, "first-run-ok")
        assert sent(turns[5].body, "hello\nbye")
    assert (workdir / "hello.py").read_text() == "print('bye')\n"
    assert (workdir / "out.txt").read_text() == "hello\nbye\n"
    return done, turns


def test_mini_swe_agent_runs_a_scripted_session(tmp_path: Path) -> None:
    _, turns = run_session("mini-swe-agent", tmp_path, api="openai-chat")
    assert all(t.headers["authorization"] == f"Bearer {TOKEN}" for t in turns)


def test_generic_points_claude_code_and_the_openai_sdk_at_the_gateway(tmp_path: Path) -> None:
    claude, mini = cli_path("claude"), cli_path("mini")
    sdk_client = [
        str(mini.parent / "python"),
        "-c",
        "import sys; from openai import OpenAI\n"
        "reply = OpenAI().chat.completions.create(model='m', tools=[{'type': 'function',"
        " 'function': {'name': 'noop', 'parameters': {'type': 'object'}}}],"
        " messages=[{'role': 'user', 'content': sys.argv[1]}])\n"
        "print(reply.choices[0].message.content)",
        "{prompt}",
    ]
    commands = {
        "claude": [claude.name, "--print", "--allowedTools=Bash", "--", "{prompt}"],
        "openai": sdk_client,
    }
    for label, command in commands.items():
        with WireFake([{"content": f"hello from {label}"}]) as fake:
            work, home = tmp_path / label / "work", tmp_path / label / "home"
            work.mkdir(parents=True)
            home.mkdir()
            launch = get_profile("generic").launch(
                command=command,
                workdir=work,
                home=home,
                gateway_url=fake.url,
                token=TOKEN,
                model="m",
                prompt="say hello",
                tools=[],
                mcp_url=None,
            )
            done = run_launch(launch, workdir=work, home=home, binary=claude)
            assert done.returncode == 0, done.stderr + done.stdout
            assert done.stdout.strip() == f"hello from {label}"
            assert fake.answered == 1 and sent(fake.turn_requests()[0].body, "say hello")


def test_claude_code_retries_an_injected_500_and_codex_does_not(tmp_path: Path) -> None:
    """What the profiles' retry settings mean: Claude Code retries a 5xx by itself (the
    fault consumes no turn), Codex is told not to (the gateway does the retrying)."""
    cases = [("claude-code", "claude", "claude-sonnet-4-5", 0), ("codex", "codex", "gpt-5", 1)]
    for profile, binary, model, code in cases:
        with WireFake([{"content": "Done."}]) as fake:
            fake.inject(500)
            workdir, home = work_and_home(tmp_path / profile)
            launch = profile_launch(
                profile,
                workdir=workdir,
                home=home,
                url=fake.url,
                token=TOKEN,
                model=model,
                prompt="hi",
                tools=["Bash"],
            )
            done = run_launch(launch, workdir=workdir, home=home, binary=cli_path(binary))
            assert done.returncode == code, done.stderr + done.stdout
            assert (fake.failures_sent, fake.answered) == (1, 1 - code)
