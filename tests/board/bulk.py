"""A forge with many briefs, claims, journals and evidence, built in one ``git fast-import``.

Acquiring 1,000 claims one CAS push at a time would take minutes; the board and sweep
tests only need the forge to *hold* that state, in the formats the real modules write:
brief files parsed by ``parse_brief``, ``claim.json`` from ``ClaimRecord.to_bytes``,
journal lines encoded by the journal's own ``encode_line`` (valid sums and chain) and
evidence records sealed by ``assay.evidence.records.seal``. One fast-import stream writes
them all into the bare repository, as a server-side import would.
"""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

from assay.claims.record import ClaimRecord, format_time
from assay.evidence.records import EvidenceRecord, encode, seal
from assay.journal.format import FORMAT_VERSION, encode_line
from tests.gatekeys import key_for

STATES = ("held", "expired", "waiting", "released", "done", "stuck", "queued")
BRIEF = """---
id: {id}
title: Bulk brief {n}
verify:
  - id: unit
    run: python -c "print({n})"
  - id: lint
    run: python -c "print('lint')"
---
Brief {n} of a bulk forge.
"""


def _journal(brief: str, fence: int, start: datetime, *, waiting: bool, done: bool) -> bytes:
    entries = [
        {"kind": "takeover", "fence": fence, "prev_fence": 0, "t": format_time(start)},
        {"kind": "start", "in": {"brief": brief}, "t": format_time(start)},
        {
            "kind": "step",
            "pos": 1,
            "step": "model",
            "name": "model",
            "status": "ok",
            "key": f"{brief}:1",
            "out": {"value": {"text": "plan"}},
            "usage": {"in_tokens": 1200, "out_tokens": 300, "usd": 0.0042},
            "t0": format_time(start),
            "t1": format_time(start + timedelta(seconds=4)),
        },
        {
            "kind": "step",
            "pos": 2,
            "step": "tool",
            "name": "write_file",
            "status": "ok",
            "key": f"{brief}:2",
            "out": {"value": "ok"},
            "t0": format_time(start + timedelta(seconds=4)),
            "t1": format_time(start + timedelta(seconds=5)),
        },
    ]
    if waiting:
        entries.append(
            {
                "kind": "wait",
                "pos": 3,
                "for": "approval",
                "until": None,
                "t": format_time(start + timedelta(seconds=6)),
            }
        )
    if done:
        entries.append(
            {
                "kind": "end",
                "status": "ok",
                "out": {"value": "done"},
                "t": format_time(start + timedelta(seconds=7)),
            }
        )
    lines = []
    prev = ""
    for seq, entry in enumerate(entries, start=1):
        entry.update(v=FORMAT_VERSION, seq=seq, prev=prev, run=f"run-{brief}", fence=fence)
        raw, prev = encode_line(entry)
        lines.append(raw)
    return b"\n".join(lines) + b"\n"


class _Stream:
    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.mark = 0

    def blob(self, data: bytes) -> int:
        self.mark += 1
        self.parts.append(b"blob\nmark :%d\ndata %d\n" % (self.mark, len(data)) + data + b"\n")
        return self.mark

    def commit(
        self, ref: str, files: dict[str, int], *, when: int, parent: int | None = None
    ) -> int:
        self.mark += 1
        message = b"bulk"
        head = (
            b"commit %s\nmark :%d\nauthor bulk <bulk@assay.invalid> %d +0000\n"
            b"committer bulk <bulk@assay.invalid> %d +0000\ndata %d\n%s\n"
            % (ref.encode(), self.mark, when, when, len(message), message)
        )
        body = [head]
        if parent is not None:
            body.append(b"from :%d\n" % parent)
        body.append(b"deleteall\n")
        for path, mark in sorted(files.items()):
            body.append(b"M 100644 :%d %s\n" % (mark, path.encode()))
        body.append(b"\n")
        self.parts.append(b"".join(body))
        return self.mark


def build_bulk_forge(bare: Path, count: int, *, now: datetime | None = None) -> datetime:
    """Fill the bare forge ``bare`` with ``count`` briefs in every state; return "now"."""
    now = now or datetime.now(UTC).replace(microsecond=0)
    when = int(now.timestamp())
    stream = _Stream()
    main_files = {".gitattributes": stream.blob(b".assay/** linguist-generated=true\n")}
    for n in range(count):
        brief = f"bulk-{n:04d}"
        main_files[f"briefs/{brief}.md"] = stream.blob(BRIEF.format(id=brief, n=n).encode())
    stream.commit("refs/heads/main", main_files, when=when)
    for n in range(count):
        brief = f"bulk-{n:04d}"
        state = STATES[n % len(STATES)]
        if state == "queued":
            continue
        start = now - timedelta(hours=1, seconds=n)
        fence = 1 + n % 3
        claim = ClaimRecord(
            brief=brief,
            desk="coder",
            holder=f"holder-{n}",
            fence=fence,
            state="held" if state == "expired" else state,  # type: ignore[arg-type]
            since=format_time(start),
            renewed_at=format_time(now - timedelta(seconds=600 if state == "expired" else 5)),
            lease_s=60.0,
            waiting_for="approval" if state == "waiting" else None,
            attempt=fence,
        )
        stream.commit(
            f"refs/assay/claims/{brief}",
            {"claim.json": stream.blob(claim.to_bytes())},
            when=when,
        )
        journal = _journal(brief, fence, start, waiting=state == "waiting", done=state == "done")
        branch = stream.commit(
            f"refs/heads/assay/{brief}",
            {f".assay/journal/{brief}/000001.jsonl": stream.blob(journal)},
            when=when,
        )
        if state == "done":
            record = seal(
                EvidenceRecord(
                    brief=brief,
                    row="unit",
                    command=f'python -c "print({n})"',
                    exit=0,
                    timed_out=False,
                    seconds=0.1,
                    output_sha256="sha256:" + "0" * 64,
                    output_bytes=2,
                    output_tail=f"{n}\n",
                    head_sha="",  # not at the branch head: shown as stale
                    env_fingerprint={"python": "3.11"},
                    verifier="gate:bulk",
                    journal_head="",
                    at=format_time(now),
                ),
                prev="",
                key=key_for("bulk-gate"),  # signed, as the gate signs every record
            )
            stream.commit(
                f"refs/assay/evidence/{brief}",
                {"record.json": stream.blob(encode(record))},
                when=when,
            )
        del branch
    data = b"".join(stream.parts) + b"done\n"
    subprocess.run(
        ["git", "--git-dir", str(bare), "fast-import", "--quiet", "--force", "--done"],
        input=data,
        check=True,
        capture_output=True,
        timeout=300,
    )
    return now
