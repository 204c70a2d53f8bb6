"""Volatile tool output (``assay.gateway.volatile``): what a profile or a desk declares is
masked in the matching digest, in tool results only. Instructions, the user's words and
the model's own text are compared exactly, and a tool result that differs outside the
masked parts still differs."""

from __future__ import annotations

from typing import Any

import pytest

from assay.agentcli.profiles import PROFILES
from assay.desks import parse_manifest
from assay.errors import BadInput
from assay.gateway.calls import matching_body
from assay.gateway.volatile import Mask, masks
from assay.gateway.wire import Api, digest

NANOS = masks([r"\b\d{19}\b"], where="cli.volatile_output")


def _body(api: str, output: str, *, said: str = "ok", system: str = "be brief") -> dict[str, Any]:
    if api == "anthropic":
        return {
            "system": system,
            "messages": [
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": said},
                        {"type": "tool_use", "id": "t1", "name": "Bash"},
                    ],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": output}],
                },
            ],
        }
    if api == "gemini":
        return {
            "systemInstruction": {"parts": [{"text": system}]},
            "contents": [
                {"role": "user", "parts": [{"text": "go"}]},
                {"role": "model", "parts": [{"text": said}, {"functionCall": {"name": "Bash"}}]},
                {
                    "role": "user",
                    "parts": [
                        {"functionResponse": {"name": "Bash", "response": {"output": output}}}
                    ],
                },
            ],
        }
    if api == "openai-chat":
        return {
            "messages": [
                {"role": "system", "content": system},
                {"role": "assistant", "content": said, "tool_calls": [{"id": "t1"}]},
                {
                    "role": "tool",
                    "tool_call_id": "t1",
                    "content": [{"type": "text", "text": output}],
                },
            ]
        }
    return {
        "instructions": system,
        "input": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": said}],
            },
            {"type": "function_call_output", "call_id": "t1", "output": output},
        ],
    }


def _key(api: str, body: dict[str, Any], found: tuple[Mask, ...] = NANOS) -> str:
    api_: Api = api  # type: ignore[assignment]
    return digest("/route", matching_body(api_, body, masks=found))


APIS = ["anthropic", "openai-chat", "openai-responses", "gemini"]
NOW, LATER = "1796360000123456789", "1796360042987654321"


@pytest.mark.parametrize("api", APIS)
def test_a_declared_pattern_is_masked_in_tool_results_and_nowhere_else(api: str) -> None:
    assert _key(api, _body(api, f"now {NOW}")) == _key(api, _body(api, f"now {LATER}"))
    assert _key(api, _body(api, f"now {NOW}"), ()) != _key(api, _body(api, f"now {LATER}"), ())
    # what the tool did still counts
    assert _key(api, _body(api, f"now {NOW}")) != _key(api, _body(api, f"then {NOW}"))
    # the model's text and the instructions are never masked
    for field in ("said", "system"):
        one = _body(api, "x", **{field: f"at {NOW}"})
        two = _body(api, "x", **{field: f"at {LATER}"})
        assert _key(api, one) != _key(api, two), field


def test_the_ids_the_gemini_cli_mints_are_volatile_and_the_apis_are_not() -> None:
    def body(call_id: str) -> dict[str, Any]:
        found = _body("gemini", "done")
        found["contents"][1]["parts"][1]["functionCall"]["id"] = call_id
        found["contents"][2]["parts"][0]["functionResponse"]["id"] = call_id
        return found

    minted = ("run_shell_command_1796407386877_0", "run_shell_command_1796407399012_0")
    assert _key("gemini", body(minted[0])) == _key("gemini", body(minted[1]))
    assert _key("gemini", body("call_a1")) != _key("gemini", body("call_b2"))  # the API's own


def test_a_pattern_with_groups_masks_only_its_groups() -> None:
    (mask,) = masks([r"pid (\d+) of (\w+)"], where="w")
    assert (
        mask.apply("pid 42 of bob; pid 7 of al")
        == "pid <volatile> of <volatile>; pid <volatile> of <volatile>"
    )
    (whole,) = masks([r"pid \d+"], where="w")
    assert whole.apply("pid 42.") == "<volatile>."
    (optional,) = masks([r"took (\d+)s( cold)?"], where="w")
    assert optional.apply("took 3s, took 4s cold") == "took <volatile>s, took <volatile>s<volatile>"


def test_codex_s_session_id_and_run_stats_are_its_profile_s() -> None:
    codex = PROFILES["codex"]
    header = "Chunk ID: {c}\nWall time: {w} seconds\nProcess running with session ID {s}\nOutput:\n"

    def key(found: tuple[Mask, ...], **parts: str) -> str:
        body = _body("openai-responses", header.format(**parts) + "ok")
        return digest(
            "/v1/responses",
            matching_body("openai-responses", body, masks=found, extra=codex.normalise),
        )

    own = codex.output_masks()
    one, two = dict(c="1a2b", w="0.25", s="1671"), dict(c="9f8e", w="1.02", s="27763")
    assert key(own, **one) == key(own, **two)
    assert key((), **one) != key((), **two)  # without them, every resume of it would diverge
    assert key(own, **one) != key(own, **{**one, "s": "1671 (exited)"})


def test_temporary_paths_are_masked_for_every_profile() -> None:
    found = PROFILES["claude-code"].output_masks()
    one = _body("anthropic", "wrote /tmp/tmpab3_x9zq/out.json and /tmp/tmp.Ab3dE5fG7h")
    two = _body("anthropic", "wrote /tmp/tmpq0w9e8r7/out.json and /tmp/tmp.Zz9yX8wV7u")
    assert _key("anthropic", one, found) == _key("anthropic", two, found)
    other = _body("anthropic", "wrote /tmp/mine/out.json and /tmp/tmp.Zz9yX8wV7u")
    assert _key("anthropic", one, found) != _key("anthropic", other, found)


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        ("(unclosed", "is not a regular expression"),
        ("x*", "matches the empty string"),
        ("", "non-empty"),
    ],
)
def test_a_bad_pattern_is_bad_input_naming_it(pattern: str, says: str) -> None:
    with pytest.raises(BadInput) as caught:
        masks(["ok", pattern], where="cli.volatile_output")
    assert caught.value.message.startswith("cli.volatile_output[1]: ")
    assert says in caught.value.message


MANIFEST = """\
name: gen
kind: cli
cli:
  profile: generic
  command: [my-agent, "{prompt}"]
  volatile_output:
    - 'took \\d+ ms'
    - '(unclosed'
model: {adapter: openai, model: m, api_key_env: K}
"""


def test_a_manifest_s_bad_pattern_names_the_file_and_the_field() -> None:
    with pytest.raises(BadInput) as caught:
        parse_manifest(MANIFEST, source="desks/gen.yaml")
    message = caught.value.message
    assert message.startswith("desks/gen.yaml line 8: cli.volatile_output[1]: "), message
    assert "'(unclosed' is not a regular expression" in message
    desk = parse_manifest(MANIFEST.replace("    - '(unclosed'\n", ""), source="desks/gen.yaml")
    assert desk.cli is not None and desk.cli.volatile_output == ["took \\d+ ms"]
