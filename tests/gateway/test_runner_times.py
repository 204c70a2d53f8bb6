"""A test runner's run time in a tool result never makes a relaunched CLI diverge.

A resumed CLI runs its tools again, and unittest or pytest print how long the tests took:
``Ran 2 tests in 0.000s`` in one run, ``0.001s`` in the next. The matching digest masks
those times in every wire API's tool results, and nothing else: a different count or a
different verdict is still a different request.
"""

from __future__ import annotations

from typing import Any

import pytest

from assay.gateway.wire import digest, normalise

UNITTEST = "..\n" + "-" * 70 + "\nRan {n} tests in {t}s\n\n{verdict}\n"
PYTEST = (
    "..                                     [100%]\n===== {n} passed, 1 warning in {t}s =====\n"
)


def _body(api: str, output: str) -> dict[str, Any]:
    if api == "anthropic":
        return {
            "messages": [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t1", "name": "Bash"}],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": output}],
                },
            ]
        }
    if api == "openai-chat":
        return {"messages": [{"role": "tool", "tool_call_id": "t1", "content": output}]}
    return {"input": [{"type": "function_call_output", "call_id": "t1", "output": output}]}


def _key(api: str, output: str) -> str:
    return digest("/route", normalise(api, _body(api, output)))  # type: ignore[arg-type]


@pytest.mark.parametrize("api", ["anthropic", "openai-chat", "openai-responses"])
@pytest.mark.parametrize("template", [UNITTEST, PYTEST])
def test_only_the_run_time_is_masked(api: str, template: str) -> None:
    fast = template.format(n=2, t="0.000", verdict="OK")
    slow = template.format(n=2, t="1.250", verdict="OK")
    assert _key(api, fast) == _key(api, slow)
    assert _key(api, fast) != _key(api, template.format(n=3, t="0.000", verdict="OK"))
    if template is UNITTEST:
        failed = template.format(n=2, t="0.000", verdict="FAILED (failures=1)")
        assert _key(api, fast) != _key(api, failed)


def test_text_outside_tool_results_is_left_as_it_is() -> None:
    said = {"messages": [{"role": "user", "content": "Ran 2 tests in 0.000s"}]}
    other = {"messages": [{"role": "user", "content": "Ran 2 tests in 0.001s"}]}
    assert normalise("anthropic", said) != normalise("anthropic", other)


def test_the_request_itself_is_not_changed() -> None:
    body = _body("anthropic", UNITTEST.format(n=2, t="0.004", verdict="OK"))
    normalise("anthropic", body)
    assert "0.004s" in body["messages"][1]["content"][0]["content"]
