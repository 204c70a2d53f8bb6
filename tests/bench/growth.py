"""Growth benchmark: ``python -m tests.bench.growth [--calls 100,400] [--segment BYTES]``.

A run's forge footprint, per model call, as the run grows. A scripted conversation that
grows as Claude Code's does (each request repeats every earlier message and marks the last
one with ``cache_control``; the answers stream; tool outputs of a few KB) is driven
through the storage a ``cli`` desk uses: ``WireSession`` on a ``Run`` whose journal lives
in a ``BranchSync`` work tree, and every durability point the session makes (before a
call goes upstream and after its answer is recorded) is committed and CAS-pushed to a real
bare forge by the desk's own commit path (``BranchSync.sync``).

For 100 and 400 calls it prints, for the old layout (8 MiB segments, every blob directly in
``blobs/``, items stored as sent) beside the new one (``--fanout byte``: with the one-level
``blobs/ab/`` fan-out of before too), each divided by the number of calls:
the journal's bytes, the forge's object bytes (what the pushes wrote: the forge's own
``git gc --auto`` is off, so they stay loose objects) and the bytes one checkpoint writes
to the forge, as a mean over the run and over the last ten calls' checkpoints. Flat
per-call figures from 100 to 400 calls mean growth with what each step adds, not with the
run's length.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assay.branch import BranchSync
from assay.forge import init_forge, open_forge
from assay.gateway.wire import MARKERS, digest, normalise, split
from assay.journal import DEFAULT_SEGMENT_BYTES
from assay.journal.blobs import BlobStore
from assay.journal.blobs import Layout as BlobLayout
from assay.plumbing import Identity, run_git
from assay.runtime import Event, Run
from assay.runtime.wire import WireReply, WireRequest, WireSession

OLD_SEGMENT_BYTES = 8 * 1024 * 1024
ROUTE = "/v1/messages"
LATE = 10  # calls at the end whose checkpoints give "bytes per checkpoint, late"
WORDS = [
    "def",
    "return",
    "self",
    "import",
    "assert",
    "value",
    "path",
    "journal",
    "segment",
    "=",
    "(",
    ")",
    "0",
    "1",
    "None",
    "test",
    "the",
    "a",
    "of",
]


@dataclass
class Layout:
    name: str
    segment_bytes: int
    blobs: BlobLayout
    marks: bool


OLD = Layout(
    "old (8 MiB segments, flat blobs/, items as sent)", OLD_SEGMENT_BYTES, BlobLayout.FLAT, False
)
# Where blobs went from the first fan-out to the second level (``--fanout byte``).
FOLDERS = {BlobLayout.NIBBLES: "blobs/a/b/", BlobLayout.BYTE: "blobs/ab/"}


def new_layout(
    segment_bytes: int = DEFAULT_SEGMENT_BYTES, blobs: BlobLayout = BlobLayout.NIBBLES
) -> Layout:
    return Layout(
        f"new ({segment_bytes // 1024} KiB segments, {FOLDERS[blobs]}, markers set aside)",
        segment_bytes,
        blobs,
        True,
    )


class Checkpoints:
    """The run's hooks: each durability point is one commit and CAS push of the work tree."""

    def __init__(self, sync: BranchSync, forge_objects: Path) -> None:
        self.sync = sync
        self.objects = forge_objects
        self.count = 0
        self.measuring = False
        self.late: list[int] = []

    def durability_point(self, reason: str) -> None:
        before = object_bytes(self.objects) if self.measuring else 0
        self.sync.sync(f"growth: {reason}")
        self.count += 1
        if self.measuring:
            self.late.append(object_bytes(self.objects) - before)

    def heartbeat(self, progress: dict[str, Any]) -> None:
        pass

    def ensure_owner(self) -> None:
        pass

    def events(self) -> list[Event]:
        return []


def object_bytes(objects: Path) -> int:
    """Bytes of a bare repository's objects: loose objects and packs."""
    total = 0
    for folder, _, files in os.walk(objects):
        for name in files:
            total += os.stat(os.path.join(folder, name)).st_size
    return total


def _text(rng: random.Random, size: int) -> str:
    out: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(WORDS) if rng.random() < 0.7 else f"x{rng.randrange(10**6)}"
        out.append(word)
        length += len(word) + 1
        if rng.random() < 0.08:
            out.append("\n")
    return " ".join(out)[:size]


def _sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def answer(rng: random.Random, call: int) -> tuple[dict[str, Any], bytes]:
    """The assistant message of call ``call`` and the stream that carried it."""
    thought = _text(rng, 300)
    command = f"pytest -q tests/test_{call}.py"
    tool_id = f"toolu_{call:06d}"
    message = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": thought},
            {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": command}},
        ],
    }
    usage = {"input_tokens": 12, "cache_read_input_tokens": 1000 + 60 * call}
    chunks = [thought[i : i + 40] for i in range(0, len(thought), 40)]
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": f"msg_{call}",
                "model": "claude",
                "role": "assistant",
                "usage": usage,
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": c}}
            for c in chunks
        ),
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": json.dumps({"command": command})},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 90},
        },
        {"type": "message_stop"},
    ]
    return message, _sse(events)


def marked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as Claude Code sends them: the last block of the last one marked."""
    last = dict(messages[-1])
    blocks = list(last["content"])
    blocks[-1] = {**blocks[-1], "cache_control": {"type": "ephemeral"}}
    return [*messages[:-1], {**last, "content": blocks}]


def measure_one(calls: int, layout: Layout) -> dict[str, Any]:
    """One run of ``calls`` model calls in ``layout``; its footprint figures."""
    rng = random.Random(calls)
    system = [{"type": "text", "text": _text(rng, 8000), "cache_control": {"type": "ephemeral"}}]
    tools = [
        {"name": f"Tool{i}", "description": _text(rng, 600), "input_schema": {"type": "object"}}
        for i in range(12)
    ]
    with tempfile.TemporaryDirectory(prefix="assay-bench-growth-") as tmp:
        root = Path(tmp)
        forge_path = init_forge(root / "forge.git")
        # The forge's own `git gc --auto` would pack the loose objects now and then, and
        # hide what the pushes wrote: off, so the figure is every object written.
        run_git(["config", "receive.autogc", "false"], git_dir=forge_path)
        with open_forge(str(forge_path), cache_dir=root / "cache") as forge:
            sync = BranchSync(
                forge, "growth", workdir=root / "work", identity=Identity.for_holder("coder", "h1")
            )
            sync.checkout()
            hooks = Checkpoints(sync, forge_path / "objects")
            base_bytes = object_bytes(forge_path / "objects")
            run = Run.open(
                sync.journal_dir, hooks=hooks, fsync=False, segment_bytes=layout.segment_bytes
            )
            assert run.writer is not None
            if layout.blobs is not BlobLayout.NIBBLES:
                run.writer.blobs = BlobStore(sync.journal_dir, fsync=False, layout=layout.blobs)
            session = WireSession(run, difference=lambda recorded, request: "")
            messages: list[dict[str, Any]] = [
                {"role": "user", "content": [{"type": "text", "text": _text(rng, 1200)}]}
            ]
            for call in range(calls):
                hooks.measuring = call >= calls - LATE
                body = {
                    "model": "claude",
                    "max_tokens": 32000,
                    "system": system,
                    "tools": tools,
                    "messages": marked(messages),
                    "stream": True,
                    "metadata": {"user_id": f"session-{calls}"},
                }
                items, rest = split("anthropic", body)
                message, stream = answer(rng, call)
                request = WireRequest(
                    api="anthropic",
                    route=ROUTE,
                    items=items,
                    rest=rest,
                    digest=digest(ROUTE, normalise("anthropic", body)),
                    stream=True,
                    steerable=True,
                    marks=MARKERS["anthropic"] if layout.marks else (),
                )

                def forward(_: WireRequest, __: list[Event], raw: bytes = stream) -> WireReply:
                    return WireReply(200, "text/event-stream", raw, True, 12, 90)

                session.call(request, forward, check=lambda reply: None)
                output = _text(rng, rng.randrange(2000, 6000))
                result = {
                    "type": "tool_result",
                    "tool_use_id": f"toolu_{call:06d}",
                    "content": output,
                }
                messages += [message, {"role": "user", "content": [result]}]
            session.close()
            run.close()
            journal = sum(p.stat().st_size for p in sync.journal_dir.rglob("*") if p.is_file())
            segments = len(list(sync.journal_dir.glob("*.jsonl")))
            total = object_bytes(forge_path / "objects") - base_bytes
            loose = sum(
                p.stat().st_size
                for d in (forge_path / "objects").iterdir()
                if len(d.name) == 2
                for p in d.iterdir()
            )
    return {
        "calls": calls,
        "layout": layout.name,
        "journal_bytes": journal,
        "segments": segments,
        "forge_bytes": total,
        "loose_bytes": loose,
        "checkpoints": hooks.count,
        "late_checkpoint_bytes": sum(hooks.late) / max(len(hooks.late), 1),
    }


def measure(calls: list[int], layouts: list[Layout]) -> list[dict[str, Any]]:
    return [measure_one(n, layout) for layout in layouts for n in calls]


def table(found: list[dict[str, Any]]) -> str:
    lines = [
        "| layout | calls | journal / call | forge objects / call | checkpoint, mean "
        "| checkpoint, last 10 calls | segments | checkpoints |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in found:
        n = row["calls"]
        lines.append(
            f"| {row['layout']} | {n} | {row['journal_bytes'] / n / 1024:.1f} KiB "
            f"| {row['forge_bytes'] / n / 1024:.1f} KiB "
            f"| {row['forge_bytes'] / row['checkpoints'] / 1024:.1f} KiB "
            f"| {row['late_checkpoint_bytes'] / 1024:.1f} KiB | {row['segments']} "
            f"| {row['checkpoints']} |"
        )
    return "\n".join(lines)


def rows(found: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """The summary table's rows (``tests.bench``): per call, old layout beside new."""
    out = []
    for row in found:
        n = row["calls"]
        old = row["layout"].startswith("old")
        out.append(
            (
                f"growth: {n} calls, {'old' if old else 'new'} layout, forge bytes per call",
                f"{row['forge_bytes'] / n / 1024:.1f} KiB",
                f"journal {row['journal_bytes'] / n / 1024:.1f} KiB per call; a checkpoint late "
                f"in the run writes {row['late_checkpoint_bytes'] / 1024:.1f} KiB; {row['layout']}",
            )
        )
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", default="100,400", help="comma-separated run lengths")
    parser.add_argument(
        "--segment",
        default="",
        help="comma-separated segment sizes in KiB for the new layout (default: the default)",
    )
    parser.add_argument("--no-old", action="store_true", help="measure the new layout only")
    parser.add_argument(
        "--fanout",
        default="nibbles",
        help="comma-separated blob layouts for the new layout: nibbles (blobs/a/b/, the "
        "default) and byte (blobs/ab/, the one level before)",
    )
    parser.add_argument("--json", action="store_true", help="also print every raw figure")
    options = parser.parse_args(argv)
    calls = [int(n) for n in options.calls.split(",")]
    sizes = [int(k) * 1024 for k in options.segment.split(",")] if options.segment else []
    layouts = [] if options.no_old else [OLD]
    fanouts = [BlobLayout[name.upper()] for name in options.fanout.split(",")]
    layouts += [
        new_layout(size, blobs) for blobs in fanouts for size in (sizes or [DEFAULT_SEGMENT_BYTES])
    ]
    found = measure(calls, layouts)
    print(table(found))
    if options.json:
        json.dump(found, sys.stdout, indent=2)
        print()


if __name__ == "__main__":
    main()
