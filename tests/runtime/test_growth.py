"""Growth: a 200-turn conversation's journal stays within a small constant factor of the
size of its distinct messages (every message is stored once, in blobs/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from assay.journal import read_journal
from assay.models.base import Message
from assay.runtime import Run, execute
from tests.runtime.helpers import Talker

TURNS = 200


def conversation(run: Run, _: Any) -> Any:
    messages: list[Message] = [{"role": "system", "content": "be brief " * 50}]
    for turn in range(TURNS):
        messages.append({"role": "user", "content": f"question {turn}: " + "q" * 600})
        messages.append(run.model(messages).message)
    return len(messages)


def _size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def test_a_200_turn_conversation_grows_linearly(tmp_path: Path) -> None:
    journal = tmp_path / "j"
    # fsync=False: this test measures bytes, not durability (the crash tests cover that),
    # and 800 fsyncs would dominate its time.
    result = execute(conversation, None, journal_dir=journal, model=Talker(), fsync=False)
    assert result.code == 0 and result.output == 2 * TURNS + 1
    messages = [{"role": "system", "content": "be brief " * 50}]
    for turn in range(TURNS):
        messages.append({"role": "user", "content": f"question {turn}: " + "q" * 600})
        messages.append({"role": "assistant", "content": f"answer {turn + 1}: " + "a" * 600})
    distinct = sum(len(json.dumps(m, separators=(",", ":"))) for m in messages)
    naive = sum(len(json.dumps(messages[: 2 * t + 2], separators=(",", ":"))) for t in range(TURNS))
    size = _size(journal)
    assert size < 2.5 * distinct, (size, distinct)
    assert size * 20 < naive  # the quadratic shape other engines record
    read = read_journal(journal)
    kinds = [e["kind"] for e in read.entries]
    # segments roll at the default size: each roll adds its `continue` line
    assert kinds.count("continue") == len(read.segments) - 1
    assert len(kinds) - kinds.count("continue") == 2 * TURNS + 2
