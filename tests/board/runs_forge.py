"""A forge holding one watched run, built in one ``git fast-import`` (as ``bulk.py`` is).

Brief ``watch`` ran on a desk that was killed while a model call was in flight: the next
holder took over at fence 2 (its takeover says one call the lost machine had made was
paid again: ``repaid``), sent the request in flight upstream again, waited for an approval
(``approve`` by ann), claimed its evidence and finished. The model's answers and the
tools' output are hostile markup (``<script>``, an ``onerror`` image, a 3,000-character
word); brief ``quiet`` is queued and has no branch, so no run page.
"""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from assay.claims.record import ClaimRecord, format_time
from assay.evidence.records import EvidenceRecord, encode, seal
from assay.journal.format import FORMAT_VERSION, encode_line
from tests.board.bulk import _Stream
from tests.gatekeys import key_for

SCRIPT = "<script>document.title='pwned'</script>"
SAID = f"{SCRIPT} I will write the file first. " + "Then I read it back. " * 12
IMG = '"><img src=x onerror="document.title=1">'
WORD = "x" * 3000  # one word no line may break at a space
BRIEF = """---
id: {id}
title: {title}
verify:
  - id: unit
    run: python -c "print(1)"
  - id: lint
    run: python -c "print(2)"
---
A brief.
"""


def _journal(start: datetime) -> bytes:
    def at(seconds: float) -> str:
        return format_time(start + timedelta(seconds=seconds))

    def model(pos: int, t0: float, t1: float, answer: Any, **more: Any) -> dict[str, Any]:
        return {
            "kind": "step",
            "pos": pos,
            "step": "model",
            "name": "model",
            "status": "ok",
            "key": f"watch:{pos}",
            "out": {"value": answer},
            "usage": {"in_tokens": 1200, "out_tokens": 300, "usd": 0.0042},
            "ms": (t1 - t0) * 1000,
            "t0": at(t0),
            "t1": at(t1),
            **more,
        }

    def intent(pos: int, step: str, name: str, t0: float, **more: Any) -> dict[str, Any]:
        key = f"watch:{pos}"
        return {"kind": "step", "pos": pos, "step": step, "name": name, "key": key, **more} | {
            "status": "started",
            "t0": at(t0),
        }

    first = {
        "role": "assistant",
        "content": SAID,
        "tool_calls": [
            {
                "function": {
                    "name": "write_file",
                    "arguments": json.dumps({"path": "a.txt", "text": IMG}),
                }
            }
        ],
    }
    lines: list[tuple[int, dict[str, Any]]] = [
        (1, {"kind": "takeover", "prev_fence": 0, "t": at(0)}),
        (1, {"kind": "start", "in": {"value": {"brief": "watch"}}, "t": at(0)}),
        (1, intent(1, "model", "model", 0)),
        (1, model(1, 0, 4, first)),
        (1, intent(2, "tool", "write_file", 4, args={"path": "a.txt", "text": IMG})),
        (
            1,
            {
                "kind": "step",
                "pos": 2,
                "step": "tool",
                "name": "write_file",
                "status": "ok",
                "key": "watch:2",
                "out": {"value": f"wrote a.txt: {IMG} {WORD}"},
                "ms": 1000,
                "t0": at(4),
                "t1": at(5),
            },
        ),
        (1, intent(3, "model", "model", 5)),  # in flight when the process was killed
        (2, {"kind": "takeover", "prev_fence": 1, "repaid": 1, "t": at(300)}),
        (2, {"kind": "start", "in": {"value": {"brief": "watch"}}, "t": at(300)}),
        (
            2,
            model(
                3,
                300,
                303,
                {"role": "assistant", "content": f"{SCRIPT} asking for approval"},
                tools=[{"name": "Bash", "input": "cat a.txt", "output": f"{SCRIPT}{WORD}"}],
            ),
        ),
        (2, {"kind": "wait", "pos": 4, "for": "approval", "until": None, "t": at(304)}),
        (
            2,
            {
                "kind": "wake",
                "pos": 4,
                "for": "approval",
                "event": {"id": "e1", "kind": "approve", "actor": "ann"},
                "t": at(900),
            },
        ),
        (2, intent(5, "compute", "evidence.claimed", 901)),
        (
            2,
            {
                "kind": "step",
                "pos": 5,
                "step": "compute",
                "name": "evidence.claimed",
                "status": "ok",
                "key": "watch:5",
                "out": {
                    "value": {
                        "rows": [
                            {"row": "unit", "result": "pass", "note": SCRIPT},
                            {"row": "lint", "result": "pass"},
                        ]
                    }
                },
                "t0": at(901),
                "t1": at(902),
            },
        ),
        (2, {"kind": "end", "status": "ok", "out": {"value": "done"}, "t": at(903)}),
    ]
    raw_lines = []
    prev = ""
    for seq, (fence, entry) in enumerate(lines, start=1):
        entry.update(v=FORMAT_VERSION, seq=seq, prev=prev, run="run-watch", fence=fence)
        raw, prev = encode_line(entry)
        raw_lines.append(raw)
    return b"\n".join(raw_lines) + b"\n"


def build_watched_forge(bare: Path) -> datetime:
    """Fill the bare forge ``bare`` (see the module docstring); return the run's start."""
    start = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    when = int((start + timedelta(seconds=903)).timestamp())
    stream = _Stream()
    main_files = {
        "briefs/watch.md": stream.blob(BRIEF.format(id="watch", title=f"Watch {SCRIPT}").encode()),
        "briefs/quiet.md": stream.blob(BRIEF.format(id="quiet", title="Quiet").encode()),
    }
    stream.commit("refs/heads/main", main_files, when=when)
    claim = ClaimRecord(
        brief="watch",
        desk="coder",
        holder="host-b",
        fence=2,
        state="done",
        since=format_time(start + timedelta(seconds=300)),
        renewed_at=format_time(start + timedelta(seconds=903)),
        lease_s=60.0,
        attempt=2,
    )
    stream.commit(
        "refs/assay/claims/watch", {"claim.json": stream.blob(claim.to_bytes())}, when=when
    )
    journal = stream.blob(_journal(start))
    stream.commit(
        "refs/heads/assay/watch", {".assay/journal/watch/000001.jsonl": journal}, when=when
    )
    record = seal(
        EvidenceRecord(
            brief="watch",
            row="unit",
            command='python -c "print(1)"',
            exit=0,
            timed_out=False,
            seconds=0.1,
            output_sha256="sha256:" + "0" * 64,
            output_bytes=2,
            output_tail="1\n",
            head_sha="0" * 40,  # another commit than the tip: shown as not the tip
            env_fingerprint={"python": "3.11"},
            verifier="gate:ci",
            journal_head="",
            at=format_time(start + timedelta(seconds=950)),
        ),
        prev="",
        key=key_for("runs-gate"),
    )
    stream.commit(
        "refs/assay/evidence/watch", {"record.json": stream.blob(encode(record))}, when=when
    )
    data = b"".join(stream.parts) + b"done\n"
    subprocess.run(
        ["git", "--git-dir", str(bare), "fast-import", "--quiet", "--force", "--done"],
        input=data,
        check=True,
        capture_output=True,
        timeout=60,
    )
    return start
