"""The ``scripted`` adapter: a YAML file of responses, for offline demos, tests, benchmarks.

```yaml
responses:
  - content: I will add the function.
    tool_calls:
      - {name: write_file, arguments: {path: stats.py, content: "def median(xs): ..."}}
  - tool_calls:
      - {name: run, arguments: {command: pytest -q}}
  - content: Done.
    tool_calls:
      - name: finish
        arguments: {summary: added median(), evidence: [{row: unit, result: pass}]}
    usage: {in_tokens: 1200, out_tokens: 80}   # optional; estimated otherwise
```

The response is chosen by position in the conversation, not by a cursor: the number of
assistant messages already in ``messages`` (plus any ``assay_turns`` a compaction summary
message carries for the turns it replaced). A resumed or replayed run asking the same
question therefore gets the same answer. Tool call ids are ``call_<turn>_<index>``.

One script can serve several briefs: a ``briefs`` mapping of brief id to its own
``responses`` list, chosen by the id in the conversation's first user message (the agent
desk opens with ``# Brief <id>: <title>``). With ``ASSAY_MODEL_CALL_LOG`` set, every
answered call appends ``{brief, turn, pid}`` to that file, so a run can count the model
calls it paid for.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError, model_validator

from assay.briefs.format import StrictModel
from assay.briefs.yamldoc import load_yaml, validation_error
from assay.errors import BadInput
from assay.models.base import Message, ModelReply, ToolSpec, Usage, estimate_tokens
from assay.models.config import ScriptedConfig

CALL_LOG_ENV = "ASSAY_MODEL_CALL_LOG"


class ScriptedCall(StrictModel):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ScriptedUsage(StrictModel):
    in_tokens: Annotated[int, Field(ge=0)] = 0
    out_tokens: Annotated[int, Field(ge=0)] = 0


class ScriptedResponse(StrictModel):
    content: str | None = None
    tool_calls: list[ScriptedCall] = Field(default_factory=list)
    usage: ScriptedUsage | None = None
    delay_s: Annotated[float, Field(ge=0)] | None = None


class BriefScript(StrictModel):
    responses: list[ScriptedResponse]


class Script(StrictModel):
    """Either one ``responses`` list, or one per brief under ``briefs``."""

    responses: list[ScriptedResponse] | None = None
    briefs: dict[str, BriefScript] | None = None

    @model_validator(mode="after")
    def _one_shape(self) -> Script:
        if (self.responses is None) == (self.briefs is None):
            raise ValueError("a model script has either a responses list or a briefs mapping")
        return self

    def responses_for(self, messages: list[Message], *, source: str) -> list[ScriptedResponse]:
        """The responses that answer this conversation (by its brief, for a ``briefs`` script)."""
        if self.responses is not None:
            return self.responses
        brief = brief_of(messages)
        scripts = self.briefs or {}
        if brief not in scripts:
            raise BadInput(
                f"{source}: briefs: the script has no responses for brief {brief!r} "
                f"(it has {', '.join(sorted(scripts)) or 'none'})"
            )
        return scripts[brief].responses


def load_script(path: Path, *, source: str | None = None) -> Script:
    """Read and validate a script file; ``BadInput`` names the file, line and field."""
    name = source or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(f"{name}: the model script does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{name}: cannot read the model script: {exc}") from None
    doc = load_yaml(text, source=name)
    if not isinstance(doc.data, dict):
        raise doc.bad([], "a model script is a mapping with a responses list")
    try:
        return Script.model_validate(doc.data)
    except ValidationError as exc:
        raise validation_error(exc, doc) from None


_BRIEF_HEADING = re.compile(r"^# Brief ([A-Za-z0-9_.-]+):", re.MULTILINE)


def brief_of(messages: list[Message]) -> str | None:
    """The brief id named by the first user message (``# Brief <id>: <title>``), if any."""
    for message in messages:
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            found = _BRIEF_HEADING.search(message["content"])
            return found.group(1) if found else None
    return None


def log_call(messages: list[Message], turn: int) -> None:
    """Append ``{brief, turn}`` to ``$ASSAY_MODEL_CALL_LOG`` when it is set.

    The demo and the torture tests count completed model calls with it: a call answered
    twice for the same brief and turn is a model call paid twice. One short ``O_APPEND``
    write per call, so concurrent desk processes never interleave lines.
    """
    path = os.environ.get(CALL_LOG_ENV)
    if not path:
        return
    line = json.dumps({"brief": brief_of(messages), "turn": turn, "pid": os.getpid()}) + "\n"
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, line.encode())
    finally:
        os.close(descriptor)


def assistant_turns(messages: list[Message]) -> int:
    """How many assistant turns a conversation has had (compacted turns included)."""
    turns = 0
    for message in messages:
        if message.get("role") == "assistant":
            turns += 1
        carried = message.get("assay_turns")
        if isinstance(carried, int) and not isinstance(carried, bool) and carried > 0:
            turns += carried
    return turns


class ScriptedModel:
    """``ModelAdapter`` answering from a script, by position in the conversation."""

    name = "scripted"

    def __init__(self, config: ScriptedConfig, *, base_dir: Path) -> None:
        self.config = config
        self.context_window = config.context_window
        self.path = (base_dir / config.script).resolve()
        self.script = load_script(self.path, source=str(base_dir / config.script))

    def complete(
        self, messages: list[Message], *, tools: list[ToolSpec] | None = None
    ) -> ModelReply:
        """The response at position ``assistant_turns(messages)``; ``BadInput`` past the end."""
        turn = assistant_turns(messages)
        responses = self.script.responses_for(messages, source=self.config.script)
        if turn >= len(responses):
            raise BadInput(
                f"{self.config.script}: the script has {len(responses)} responses and the "
                f"conversation asks for response {turn + 1}"
            )
        response = responses[turn]
        delay = response.delay_s if response.delay_s is not None else self.config.delay_s
        if delay:
            time.sleep(delay)  # stands in for a model's latency (benchmarks, the demo's kill)
        message: Message = {"role": "assistant", "content": response.content}
        if response.tool_calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{turn}_{index}",
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": json.dumps(call.arguments, sort_keys=True),
                    },
                }
                for index, call in enumerate(response.tool_calls)
            ]
        if response.usage is not None:
            in_tokens, out_tokens = response.usage.in_tokens, response.usage.out_tokens
        else:
            in_tokens, out_tokens = estimate_tokens(messages), estimate_tokens([message])
        log_call(messages, turn)
        return ModelReply(
            message=message,
            usage=Usage(in_tokens, out_tokens, self.config.price.usd(in_tokens, out_tokens)),
            model=f"scripted:{Path(self.config.script).name}",
            stop="tool_calls" if response.tool_calls else "stop",
        )
