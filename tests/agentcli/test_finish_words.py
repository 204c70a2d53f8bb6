"""A CLI without MCP says its finish in words (``assay.agentcli.finish``): the claim is the
last ``ASSAY-FINISH:`` object of the model's answer, in its text or in a tool call's
arguments (mini-swe-agent's submit command), and nothing else is taken for one."""

from __future__ import annotations

import json
import shlex

from assay.agentcli.finish import MARKER, WORDS_HINT, claim_in
from assay.gateway.apis import Said

CLAIM = {"summary": "Added slugify().", "evidence": [{"row": "unit", "result": "pass"}]}


def test_the_claim_is_read_from_the_answers_text() -> None:
    said = Said(text=f"Done: the file is written.\n\n{MARKER} {json.dumps(CLAIM)}\n")
    assert claim_in(said) == CLAIM


def test_the_claim_is_read_from_a_submit_command_with_its_shell_quoting() -> None:
    echo = shlex.quote(f"{MARKER} {json.dumps(CLAIM)}")
    command = f"echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && echo {echo}"
    said = Said(calls=({"name": "bash", "arguments": {"command": command}},))
    assert claim_in(said) == CLAIM


def test_the_last_claim_wins_and_what_is_not_one_is_ignored() -> None:
    first = {"summary": "first"}
    text = f"{MARKER} {json.dumps(first)}\n{MARKER} {{not json\n{MARKER} {json.dumps(CLAIM)}"
    assert claim_in(Said(text=text)) == CLAIM
    assert claim_in(Said(text=f"{MARKER} [1, 2]")) is None  # an object, or nothing
    assert claim_in(Said(text="All tests pass.")) is None
    assert claim_in(Said(text=f"{MARKER}\n\nprint({{'a': 1}})\n{json.dumps(first)}")) is None
    assert claim_in(None) is None


def test_the_hint_in_the_prompt_holds_no_claim_of_its_own() -> None:
    # the prompt is never read for a claim; and even echoed back, the hint is none
    assert MARKER in WORDS_HINT
    assert claim_in(Said(text=WORDS_HINT)) is None
