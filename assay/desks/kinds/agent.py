"""The ``agent`` desk kind: a tool-calling loop written only against the durable ``Run``.

One turn is: drain steering (``run.signals()``, the only drain point), compact the
conversation if it nears the model's context window (a recorded summarisation step),
one model step, then each tool call the model asked for as a tool step in the brief's work
tree (the desk's ``ToolBox`` validates arguments; an undeclared tool or a path outside the
tree is ``Denied``, exit 77, and recorded). ``finish`` ends the run: optionally after a
durable wait for approval, it records the desk's claimed evidence and the environment
fingerprint as the ``compute`` step ``evidence.claimed``.

Everything here is deterministic orchestration: the conversation is rebuilt on replay from
recorded model outputs, tool results and signals, so a run resumed in another process
sends the model exactly the messages the crashed one would have sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assay.desks.host.objectives import ObjectiveLoop
from assay.errors import BadInput, Failed

SYSTEM_PROMPT = (
    "You are an Assay desk: an engineer working on one brief in a git work tree. "
    "Use the tools to read and change files and to run the allowed commands. "
    "When the brief is done, call `finish` with a short `summary` and, for each of the "
    "brief's verify rows, an `evidence` item {row, result: pass|fail, note}. "
    "An independent gate re-runs every row; claim only what you checked."
)
STEERING_PREFIX = "Steering from {actor}: "
NUDGE = "No tool was called. Call a tool to make progress, or `finish` when the brief is done."
COMPACT_PROMPT = (
    "Summarise the conversation below for your own later use: the brief's goal, what was "
    "done (files changed, commands run and their results), what remains, and any steering "
    "received. Be complete but brief."
)
TOOL_OUTPUT_LIMIT = 16_000


@dataclass(frozen=True)
class AgentOptions:
    """How one agent desk behaves (from its manifest, with the brief's overrides)."""

    approval: bool = False  # wait for ``assay approve`` before ``finish`` takes effect
    max_turns: int = 60
    compact_at: float = 0.75  # share of the context window that triggers compaction
    keep_recent: int = 6  # messages kept verbatim after a compaction
    system_prompt: str = SYSTEM_PROMPT


@dataclass
class AgentOutcome:
    """How the loop ended, for the desk loop's review record and claim."""

    status: str  # "done", "failed" or "cancelled"
    summary: str
    evidence: list[dict[str, Any]] = field(default_factory=list)
    turns: int = 0
    compactions: int = 0
    objective: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "summary": self.summary,
            "evidence": self.evidence,
            "turns": self.turns,
            "compactions": self.compactions,
            "objective": self.objective,
        }


Fingerprint = Callable[[], dict[str, str]]


def brief_prompt(brief: Any) -> str:
    """The first user message: the brief's title, body and verify rows."""
    rows = "\n".join(
        f"- `{getattr(row, 'id', '?')}`: `{getattr(row, 'run', '')}`"
        for row in getattr(brief, "verify", []) or []
    )
    text = f"# Brief {brief.id}: {brief.title}\n\n{getattr(brief, 'body', '') or ''}".rstrip()
    if rows:
        text += f"\n\n## Verify rows (re-run by the gate)\n\n{rows}"
    return text


def message_of(reply: Any) -> dict[str, Any]:
    """The assistant message of a model step's output (a ``ModelReply`` or its JSON)."""
    if isinstance(reply, Mapping):
        message = reply.get("message", reply)
    else:
        message = getattr(reply, "message", None)
    if not isinstance(message, Mapping):
        raise BadInput(f"a model reply has no assistant message: {reply!r:.200}")
    return dict(message)


def estimate_tokens(messages: list[dict[str, Any]]) -> int:
    """A cheap, deterministic size estimate (about four characters a token)."""
    return len(json.dumps(messages, sort_keys=True, default=str)) // 4 + 4 * len(messages)


def _render(result: Any) -> str:
    text = result if isinstance(result, str) else json.dumps(result, sort_keys=True, default=str)
    if len(text) > TOOL_OUTPUT_LIMIT:
        text = text[:TOOL_OUTPUT_LIMIT] + f"\n[... {len(text) - TOOL_OUTPUT_LIMIT} more chars]"
    return text


def _arguments(call: Mapping[str, Any]) -> tuple[str, str, dict[str, Any] | str]:
    """``(id, name, args or an error text)`` of one tool call from the model."""
    function = call.get("function") or {}
    name = str(function.get("name", ""))
    raw = function.get("arguments", "{}")
    if isinstance(raw, Mapping):
        return str(call.get("id", "")), name, dict(raw)
    try:
        args = json.loads(raw or "{}")
    except ValueError as exc:
        return str(call.get("id", "")), name, f"arguments are not JSON: {exc}"
    if not isinstance(args, dict):
        return str(call.get("id", "")), name, "arguments must be a JSON object"
    return str(call.get("id", "")), name, args


def claimed_rows(brief: Any, raw: Any) -> list[dict[str, Any]]:
    """Normalise the ``evidence`` a desk passed to ``finish`` to the brief's rows."""
    declared = [getattr(row, "id", None) for row in getattr(brief, "verify", []) or []]
    given: dict[str, dict[str, Any]] = {}
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, Mapping) or not isinstance(item.get("row"), str):
            continue
        result = str(item.get("result", "")).lower()
        given[item["row"]] = {
            "row": item["row"],
            "result": result if result in {"pass", "fail"} else "fail",
            "note": str(item.get("note", ""))[:500],
        }
    rows = [given[row] for row in declared if row in given]
    rows += [row for name, row in sorted(given.items()) if name not in declared]
    return rows


def compact(run: Any, messages: list[dict[str, Any]], *, keep_recent: int) -> list[dict[str, Any]]:
    """Replace the middle of the conversation by a recorded summarisation step.

    The full transcript stays in the journal (every model request records its messages);
    only the working conversation shrinks. The cut never orphans a tool result from the
    assistant message that asked for it.
    """
    head = messages[:2]  # system prompt and the brief
    cut = max(2, len(messages) - keep_recent)
    while cut < len(messages) and messages[cut].get("role") == "tool":
        cut += 1
    middle, tail = messages[2:cut], messages[cut:]
    if not middle:
        return messages
    transcript = json.dumps(middle, sort_keys=True, default=str)
    request = [
        {"role": "system", "content": COMPACT_PROMPT},
        {"role": "user", "content": transcript},
    ]
    reply = run.model(request, tools=None)
    summary = str(message_of(reply).get("content") or "")
    # ``assay_turns`` carries how many assistant turns the summary replaces, so adapters
    # that answer by position (the scripted model) keep counting turns across a compaction.
    replaced = sum(1 for m in middle if m.get("role") == "assistant") + sum(
        int(m.get("assay_turns", 0) or 0) for m in middle
    )
    run.step("compact", lambda: {"replaced": len(middle), "turns": replaced}, kind="compute")
    note = {
        "role": "user",
        "content": f"Summary of the work so far (compacted):\n{summary}",
        "assay_turns": replaced,
    }
    return [*head, note, *tail]


def _steering(event: Any) -> str:
    actor = getattr(event, "actor", "") or "a human"
    return STEERING_PREFIX.format(actor=actor) + str(getattr(event, "text", ""))


def run_agent(
    run: Any,
    brief: Any,
    *,
    options: AgentOptions,
    context_window: int,
    fingerprint: Fingerprint,
    tool_specs: list[dict[str, Any]],
    objective: ObjectiveLoop | None = None,
) -> AgentOutcome:
    """The agent loop; ``run`` is the durable ``Run``, everything else is deterministic.

    With an ``objective``, ``finish`` runs its judge: a failing verdict goes back to the
    model as the result of ``finish`` and the conversation carries on as the next run.
    """
    if objective is not None:
        objective.start_attempt(run)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": options.system_prompt},
        {"role": "user", "content": brief_prompt(brief)},
    ]
    compactions = 0
    for turn in range(1, options.max_turns + 1):
        for event in run.signals():
            if getattr(event, "kind", "") == "cancel":
                return AgentOutcome("cancelled", f"cancelled by {event.actor or 'a human'}")
            messages.append({"role": "user", "content": _steering(event)})
        if context_window and estimate_tokens(messages) > options.compact_at * context_window:
            messages = compact(run, messages, keep_recent=options.keep_recent)
            compactions += 1
        reply = message_of(run.model(messages, tools=tool_specs))
        messages.append(reply)
        calls = reply.get("tool_calls") or []
        if not calls:
            messages.append({"role": "user", "content": NUDGE})
            continue
        for call in calls:
            call_id, name, args = _arguments(call)
            if isinstance(args, str):
                messages.append({"role": "tool", "tool_call_id": call_id, "content": args})
                continue
            if name == "finish":
                outcome = _finish(
                    run, brief, args, options=options, fingerprint=fingerprint, objective=objective
                )
                if isinstance(outcome, str):  # rejected: the model hears why and carries on
                    messages.append({"role": "tool", "tool_call_id": call_id, "content": outcome})
                    continue
                outcome.turns, outcome.compactions = turn, compactions
                return outcome
            result = _call_tool(run, name, args)
            messages.append({"role": "tool", "tool_call_id": call_id, "content": _render(result)})
    return AgentOutcome(
        "failed", f"gave up after {options.max_turns} turns", turns=options.max_turns
    )


def _call_tool(run: Any, name: str, args: dict[str, Any]) -> Any:
    """One recorded tool step; a tool's own failure goes back to the model as text.

    ``Denied`` (and every other error class that ends the run) propagates; the runtime
    has recorded it as a ``denied`` entry at this step's position.
    """
    try:
        return run.tool(name, args)
    except (BadInput, Failed) as problem:
        return {"error": problem.message}


def _finish(
    run: Any,
    brief: Any,
    args: dict[str, Any],
    *,
    options: AgentOptions,
    fingerprint: Fingerprint,
    objective: ObjectiveLoop | None = None,
) -> AgentOutcome | str:
    """Approve (if asked), then record the claimed evidence; the reason when rejected."""
    checked = _call_tool(run, "finish", args)  # the ToolBox validates the arguments
    if isinstance(checked, Mapping) and "error" in checked:
        return f"finish was refused: {checked['error']}"  # malformed evidence: try again
    if isinstance(checked, Mapping):
        args = {**args, **checked}
    if options.approval:
        event = run.wait_for("approval")
        if getattr(event, "kind", "approve") == "reject":
            return "finish was rejected: " + (str(getattr(event, "text", "")) or "no reason")
    rows = claimed_rows(brief, args.get("evidence"))

    def claim() -> dict[str, Any]:
        return {"rows": rows, "env_fingerprint": fingerprint()}

    run.step("evidence.claimed", claim, kind="compute")
    outcome = AgentOutcome("done", str(args.get("summary", "")), evidence=rows)
    if objective is not None:
        closed, feedback = objective.judge(run)
        if not closed:
            objective.start_attempt(run)  # waits (paused) when max_runs is used up
            return feedback
        outcome.objective = {"attempts": objective.attempts, "state": "closed"}
    return outcome


def worktree_fingerprint(env: Any, tree: Path, run_env: Mapping[str, str]) -> Fingerprint:
    """The environment fingerprint of the work tree, via the evidence module, of the
    environment the desk's commands run with (``run_env``: ``ToolBox.process_env()``)."""

    def compute() -> dict[str, str]:
        from assay.evidence import fingerprint

        return dict(fingerprint(env, tree, run_env=run_env))

    return compute
