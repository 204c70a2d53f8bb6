"""A run you can watch: its journal as a timeline of what happened, for ``assay history``.

Every row is drawn from the journal's lines and their one fold (``assay.journal.fold``):
each entry as written; under a model call, what the model said (its text and the tool
calls it asked for, read from the recorded answer); before it, the agent's own tool calls
that request completed, with their output; where a process stopped without closing its
session (killed, its lease lost, or gone on an error it gave the brief back for), a
``stopped`` row naming what it had in flight; where
the resuming process sent that request upstream again, a ``repeated`` row; each wake with
the event that ended the wait (an approval names its approver); and each evidence row the
run claimed. Rows shorten what they show and carry it in full (``full``, up to ``FULL``
characters: the run page's unfolded text); ``entries`` carry it in full, for ``--json``. A
step's row carries what it cost (tokens, dollars, seconds), for the board's run page.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from assay.errors import AssayError
from assay.journal import Journal
from assay.journal.fold import CLAIM_STEP, Interruption, RunFacts, fold, step_label

SHORT = 120  # characters of an answer's text or a tool's input or output in a row
FULL = 64 * 1024  # characters of it a row keeps for the run page (the journal has it all)


@dataclass(frozen=True)
class Row:
    """One line of the timeline (``seq`` is empty for a row drawn under an entry)."""

    seq: str
    pos: str
    kind: str
    what: str
    status: str = ""
    time: str = ""
    full: str = ""  # ``what`` unshortened (up to FULL characters) when ``what`` was cut
    tokens: int = 0  # a step's tokens in and out, its dollars and its seconds
    usd: float = 0.0
    seconds: float | None = None


@dataclass
class Timeline:
    """The rows, the journal's lines with what they mean, and the fold they came from."""

    rows: list[Row] = field(default_factory=list)
    entries: list[dict[str, Any]] = field(default_factory=list)
    facts: RunFacts = field(default_factory=RunFacts)

    def summary(self) -> str:
        """One sentence of counts: answers, requests repeated upstream, interruptions."""
        facts = self.facts
        answered = sum(
            1
            for rec in facts.positions.values()
            if rec.result is not None and rec.result.get("step") == "model"
        )
        repeated = facts.repeated_requests
        kills = len(facts.interruptions)
        text = (
            f"{answered} model call(s) answered, {answered + repeated} request(s) sent "
            f"upstream ({repeated} repeated"
        )
        text += ": in flight when a process stopped)" if repeated else ")"
        text += f"; {kills} process(es) stopped and resumed" if kills else ""
        return text + "."


def shorten(text: str, limit: int = SHORT) -> str:
    """One line of at most ``limit`` characters (an ellipsis marks a cut)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _full(text: str, shown: str) -> str:
    """``text`` for a row's ``full``: "" when ``shown`` already is all of it."""
    if shown == text:
        return ""
    if len(text) <= FULL:
        return text
    return text[:FULL] + f"\n[... {len(text) - FULL} more characters in the journal]"


def _text_row(where: str, kind: str, text: str, status: str = "") -> Row:
    shown = shorten(text)
    return Row("", where, kind, shown, status, full=_full(text, shown))


def _cost(entry: Mapping[str, Any]) -> dict[str, Any]:
    """What a finished step cost: its tokens, dollars and seconds, as its line records."""
    usage = entry.get("usage")
    usage = usage if isinstance(usage, Mapping) else {}
    tokens = sum(
        value
        for value in (usage.get("in_tokens"), usage.get("out_tokens"))
        if isinstance(value, int) and not isinstance(value, bool)
    )
    usd, ms = _number(usage.get("usd")), _number(entry.get("ms"))
    return {"tokens": tokens, "usd": usd or 0.0, "seconds": None if ms is None else ms / 1000}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def build_timeline(journal: Journal) -> Timeline:
    """The timeline of ``journal`` (its blobs are read for the model's answers)."""
    facts = fold(journal.entries)
    stops = {stop.last_seq: stop for stop in facts.interruptions}
    resumes = {stop.resumed_seq: stop for stop in facts.interruptions}
    repeated = set(facts.repeated)
    timeline = Timeline(facts=facts)
    intents: dict[int, dict[str, Any]] = {}
    intent_row: dict[int, int] = {}
    for raw in journal.entries:
        entry = dict(raw)
        seq, pos = int(entry.get("seq", 0)), entry.get("pos")
        where = "" if pos is None else str(pos)
        kind = str(entry["kind"])
        rows = timeline.rows
        if kind == "step" and entry.get("status") == "started" and isinstance(pos, int):
            intents[pos] = entry
            intent_row[pos] = len(rows)
        finished = kind == "step" and entry.get("status") != "started"
        rows.append(
            Row(
                str(seq),
                where,
                kind,
                _describe(entry),
                _status(entry),
                _time(entry),
                **(_cost(entry) if finished else {}),
            )
        )
        if seq in resumes:
            entry["resumed"] = _stop_json(resumes[seq])
        if kind == "step" and entry.get("status") != "started":
            intent = intents.get(pos) if isinstance(pos, int) else None
            _agent_tools(timeline, entry, intent_row.get(pos) if isinstance(pos, int) else None)
            if entry.get("step") == "model":
                said = _said(journal, entry, intent)
                if said is not None:
                    entry["said"] = said
                    rows.extend(_said_rows(where, said))
                if pos in repeated:
                    entry["repeated"] = True
                    rows.append(
                        Row(
                            "",
                            where,
                            "repeated",
                            "request sent upstream again: in flight when its process stopped",
                        )
                    )
            elif entry.get("step") == "tool":
                rows.append(_text_row(where, "output", _output(journal, entry)))
            if entry.get("name") == CLAIM_STEP:
                rows.extend(_evidence_rows(where, entry))
        if seq in stops:
            rows.append(_stop_row(stops[seq]))
        timeline.entries.append(entry)
    return timeline


def _status(entry: Mapping[str, Any]) -> str:
    return str(entry.get("status", ""))


def _time(entry: Mapping[str, Any]) -> str:
    return str(entry.get("t1") or entry.get("t") or entry.get("t0") or "")


def _describe(entry: Mapping[str, Any]) -> str:
    kind = entry["kind"]
    if kind == "step":
        label = step_label(str(entry.get("step")), str(entry.get("name", "")))
        args = entry.get("args")
        if entry.get("status") == "started" and isinstance(args, Mapping) and args:
            return f"{label} {shorten(_json(args), SHORT - len(label))}"
        return label
    if kind == "wait":
        until = f" until {entry['until']}" if entry.get("until") else ""
        return f"for {entry.get('for')}{until}"
    if kind == "wake":
        event = entry.get("event")
        if isinstance(event, Mapping):
            actor = f" by {event['actor']}" if event.get("actor") else ""
            return f"for {entry.get('for')}: {event.get('kind', 'event')}{actor}"
        return f"for {entry.get('for')}" + (" (timer)" if entry.get("timer") else "")
    if kind == "signal":
        return f"{len(entry.get('events', []))} event(s)"
    if kind == "budget":
        return f"{entry.get('limit')} {entry.get('used')}/{entry.get('max')}"
    if kind == "diverged":
        return f"{entry.get('recorded')} -> {entry.get('requested')}"
    if kind == "takeover":
        repaid = entry.get("repaid")
        again = (
            f"; {repaid} model call(s) paid again: made past the checkpoint it resumed from, "
            "lost with their machine"
            if isinstance(repaid, int) and not isinstance(repaid, bool) and repaid > 0
            else ""
        )
        return f"fence {entry.get('prev_fence')} -> {entry.get('fence')}{again}"
    if kind == "denied":
        return f"{entry.get('name', '')}: {shorten(str(entry.get('reason') or ''))}"
    if kind == "compensate":
        return str(entry.get("name", ""))
    if kind == "error":
        error = entry.get("error")
        return shorten(str(error.get("message", "")) if isinstance(error, Mapping) else "")
    if kind == "end" and entry.get("message"):
        return shorten(str(entry["message"]))
    return ""


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


def _agent_tools(timeline: Timeline, entry: Mapping[str, Any], at: int | None) -> None:
    """The agent CLI's tool calls this request completed, placed before the request."""
    found = []
    where = str(entry.get("pos", ""))
    for tool in entry.get("tools") or []:
        if not isinstance(tool, Mapping):
            continue
        asked = f"{tool.get('name')} {tool.get('input', '')}".strip()
        output = str(tool.get("output") or "")
        shown, full = asked, f"{asked}\n-> {output}" if output else asked
        if output:
            shown = f"{shorten(asked, SHORT // 2)} -> {shorten(output, SHORT // 2)}"
        status = "error" if tool.get("error") else "ok"
        shown = shorten(shown)
        whole = shorten(f"{asked} -> {output}" if output else asked, len(full) + 4)
        full = _full(full, shown) if shown != whole else ""  # nothing was cut
        found.append(Row("", where, "agent", shown, status, full=full))
    if at is None:
        timeline.rows.extend(found)
    else:
        timeline.rows[at:at] = found


def _said(
    journal: Journal, result: Mapping[str, Any], intent: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """What the model said in a recorded answer, or None when its bytes are not one."""
    out = result.get("out")
    if not isinstance(out, Mapping) or result.get("status") != "ok":
        return None
    try:
        if result.get("name") == "wire":
            if not isinstance(out.get("blob"), str):
                return None
            from assay.gateway.transcript import read_said

            api = str((intent or {}).get("api") or "")
            found = read_said(api, journal.blob(out["blob"]), stream=bool(result.get("stream")))
            return found.to_json() if found is not None else None
        from assay.gateway.transcript import said_of_message

        message = (
            journal.load(out["blob"]) if isinstance(out.get("blob"), str) else out.get("value")
        )
        return said_of_message(message).to_json()
    except (AssayError, ValueError):  # a missing or unreadable blob: the row says nothing
        return None


def _said_rows(where: str, said: Mapping[str, Any]) -> list[Row]:
    rows = []
    if said.get("text"):
        rows.append(_text_row(where, "said", str(said["text"])))
    for call in said.get("tool_calls") or []:
        arguments = call.get("arguments")
        shown = arguments if isinstance(arguments, str) else _json(arguments)
        rows.append(_text_row(where, "asks", f"{call.get('name')} {shown}"))
    return rows


def _output(journal: Journal, entry: Mapping[str, Any]) -> str:
    if entry.get("status") == "error":
        error = entry.get("error")
        return str(error.get("message", "")) if isinstance(error, Mapping) else "error"
    out = entry.get("out")
    if not isinstance(out, Mapping):
        return ""
    if "value" in out:
        value = out["value"]
        return value if isinstance(value, str) else _json(value)
    try:
        return journal.blob(str(out.get("blob"))).decode("utf-8", "replace")
    except AssayError:
        return f"(blob {out.get('blob')} missing)"


def _evidence_rows(where: str, entry: Mapping[str, Any]) -> list[Row]:
    out = entry.get("out")
    value = out.get("value") if isinstance(out, Mapping) else None
    rows = value.get("rows") if isinstance(value, Mapping) else None
    found = []
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, Mapping):
            note = f" ({shorten(str(row['note']), 80)})" if row.get("note") else ""
            found.append(Row("", where, "evidence", f"{row.get('row')}: {row.get('result')}{note}"))
    return found


def _stop_json(stop: Interruption) -> dict[str, Any]:
    return {
        "fence": stop.fence,
        "last_seq": stop.last_seq,
        "last_time": stop.last_time,
        "in_flight": [{"pos": pos, "step": label} for pos, label in stop.in_flight],
    }


def _stop_row(stop: Interruption) -> Row:
    flying = ", ".join(f"{label} at {pos}" for pos, label in stop.in_flight) or "nothing"
    # The journal cannot tell a SIGKILL from a lost lease or an error that escaped the run
    # (the desk gave the brief back): all three stop without a closing entry.
    what = f"the process at fence {stop.fence} stopped without closing its run (killed, its "
    what += f"lease lost, or an error); in flight: {flying}"
    return Row("", "", "stopped", what, "", stop.last_time)


__all__ = ["Row", "Timeline", "build_timeline", "shorten"]
