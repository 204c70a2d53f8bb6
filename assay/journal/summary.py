"""``summarize()``: the few facts about a journal that the board and sweepers show."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from assay.journal.reader import Journal


@dataclass(frozen=True)
class JournalSummary:
    """Counts, cost and position of a run, read from its journal alone."""

    entries: int = 0
    steps: int = 0
    model_calls: int = 0
    tokens: int = 0
    usd: float = 0.0
    last_step: str = ""  # label of the last step, e.g. "model" or "tool:write_file"
    last_time: str = ""  # ISO-8601 UTC time of the last entry
    last_kind: str = ""  # kind of the last entry: end, wait, step, …
    status: str = "new"  # new | running | waiting | paused | done | failed
    waiting_for: str | None = None
    fence: int = 0
    head: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def step_label(kind: str, name: str) -> str:
    """How a step is named in messages: ``model``, ``tool:write_file``, ``compute:plan``."""
    return kind if not name or name == kind else f"{kind}:{name}"


def agent_step(entry: dict[str, Any] | Any) -> str | None:
    """``agent:Bash`` for a gateway model call whose request completed tool calls of the
    agent CLI (its result line lists them in ``tools``): the last tool the agent ran."""
    tools = entry.get("tools") if hasattr(entry, "get") else None
    if isinstance(tools, list) and tools and isinstance(tools[-1], dict):
        return f"agent:{tools[-1].get('name', '')}"
    return None


def summarize(journal: Journal) -> JournalSummary:
    """Summarize a verified journal (see ``JournalSummary``)."""
    steps = model_calls = tokens = 0
    usd = 0.0
    last_step = ""
    waiting_for: str | None = None
    status = "new"
    for entry in journal.entries:
        kind = entry["kind"]
        if kind == "step" and entry.get("status") in {"ok", "error"}:
            steps += 1
            if entry.get("step") == "model":
                model_calls += 1
            usage = entry.get("usage") or {}
            tokens += int(usage.get("in_tokens", 0)) + int(usage.get("out_tokens", 0))
            usd += float(usage.get("usd", 0.0))
        if kind in {"step", "compensate"}:
            last_step = agent_step(entry) or step_label(
                str(entry.get("step", kind)), str(entry.get("name", ""))
            )
        if kind == "wait":
            waiting_for, status = str(entry.get("for", "")), "waiting"
        elif kind == "budget":
            status = "paused"
        elif kind == "end":
            waiting_for = None
            status = "done" if entry.get("status") == "ok" else "failed"
        elif kind not in {"takeover", "continue", "denied", "error", "diverged"}:
            waiting_for, status = None, "running"
    last = journal.entries[-1] if journal.entries else {}
    return JournalSummary(
        entries=len(journal.entries),
        steps=steps,
        model_calls=model_calls,
        tokens=tokens,
        usd=round(usd, 6),
        last_step=last_step,
        last_time=str(last.get("t1") or last.get("t") or last.get("t0") or ""),
        last_kind=str(last.get("kind", "")),
        status=status,
        waiting_for=waiting_for,
        fence=journal.fence,
        head=journal.head,
    )
