"""How a CLI without an MCP client (mini-swe-agent, aider) says it has finished a brief.

A CLI that can call Assay's MCP ``finish`` tool claims its summary and evidence there. One
that cannot is asked (``WORDS_HINT``, added to its prompt) to end its last answer with one
line ``ASSAY-FINISH: {"summary": ..., "evidence": [...]}``: in its text (aider) or in the
command that submits its work (mini-swe-agent's ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``).
The desk reads the claim from the model's last answer as the gateway recorded it, never
from the CLI's terminal output (which wraps long lines and echoes the prompt). It is a
claim like any ``finish``: the gate re-runs the rows.

    claim = claim_in(said)   # the last answer's Said, or None: {summary, evidence} or None
"""

from __future__ import annotations

import json
from typing import Any

from assay.gateway.apis import Said

MARKER = "ASSAY-FINISH:"
WORDS_HINT = (
    "\n\nWhen the brief is done, end your last answer (or the command that submits your "
    f"work) with one line: `{MARKER}` and then a JSON object with a short `summary` and, for "
    "each verify row, an `evidence` item {row, result: pass|fail, note}."
)


def claim_in(said: Said | None) -> dict[str, Any] | None:
    """The last ``ASSAY-FINISH:`` object in an answer's text or tool-call arguments."""
    if said is None:
        return None
    found = None
    for text in [said.text, *_strings([call.get("arguments") for call in said.calls])]:
        for claim in _claims(text):
            found = claim
    return found


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []


def _claims(text: str) -> list[dict[str, Any]]:
    """Each JSON object that starts on a marker's line in ``text`` (what trails it, the
    closing quote of the ``echo`` that printed it, is left)."""
    decoder = json.JSONDecoder()
    found = []
    at = text.find(MARKER)
    while at >= 0:
        start = text.find("{", at)
        line_end = text.find("\n", at)
        if start >= 0 and (line_end < 0 or start < line_end):
            try:
                value, _ = decoder.raw_decode(text, start)
            except ValueError:
                value = None
            if isinstance(value, dict):
                found.append(value)
        at = text.find(MARKER, at + len(MARKER))
    return found
