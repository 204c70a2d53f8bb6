"""The command model: an external agent CLI, run once per call, never through a shell."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from assay.errors import Failed
from assay.models import build_model

AGENT = """\
import os, pathlib, sys
prompt = sys.stdin.read() if len(sys.argv) < 2 else pathlib.Path(sys.argv[-1]).read_text()
pathlib.Path("changed.txt").write_text(prompt)
print("agent saw", len(prompt), "chars; mode:", os.environ.get("AGENT_MODE", "-"),
      "secret:", os.environ.get("NOT_PASSED", "-"), "key:", os.environ.get("AGENT_KEY", "-"))
"""


def command_model(tmp_path: Path, *argv: str, **extra: Any) -> Any:
    (tmp_path / "agent.py").write_text(AGENT)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    config = {"adapter": "command", "argv": [sys.executable, str(tmp_path / "agent.py"), *argv]}
    config.update(extra)
    return build_model(config, base_dir=tmp_path, workdir=work)


CONVERSATION = [
    {"role": "system", "content": "You are a coder."},
    {"role": "user", "content": "Fix it. $(touch pwned) `touch pwned2`; rm -rf x"},
]


def test_prompt_on_stdin_runs_in_the_work_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_MODE", "m1")
    monkeypatch.setenv("AGENT_KEY", "k1")
    monkeypatch.setenv("NOT_PASSED", "s1")
    # Declared, but a credential by its name: only the supervisor holds those.
    model = command_model(tmp_path, env=["AGENT_MODE", "AGENT_KEY"])
    reply = model.complete(CONVERSATION)
    written = (tmp_path / "work" / "changed.txt").read_text()
    assert "## system\n\nYou are a coder." in written
    assert "$(touch pwned)" in written  # the text arrived verbatim...
    assert not list((tmp_path / "work").glob("pwned*"))  # ...and no shell ever ran it
    assert reply.message["role"] == "assistant"
    assert "mode: m1 secret: - key: -" in reply.message["content"]
    assert reply.stop == "stop"


def test_prompt_in_a_file(tmp_path: Path) -> None:
    model = command_model(tmp_path, "--prompt", "{prompt_file}", prompt="file")
    reply = model.complete(CONVERSATION)
    assert "agent saw" in reply.message["content"]
    assert "Fix it." in (tmp_path / "work" / "changed.txt").read_text()


def test_non_zero_exit_is_failed(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    model = build_model(
        {
            "adapter": "command",
            "argv": [sys.executable, "-c", "import sys; print('boom'); sys.exit(4)"],
        },
        base_dir=tmp_path,
        workdir=tmp_path / "work",
    )
    with pytest.raises(Failed, match="exited 4: boom"):
        model.complete(CONVERSATION)


def test_timeout_is_failed(tmp_path: Path) -> None:
    model = build_model(
        {
            "adapter": "command",
            "argv": [sys.executable, "-c", "import time; time.sleep(60)"],
            "timeout_s": 0.5,
        },
        base_dir=tmp_path,
    )
    with pytest.raises(Failed, match="timed out"):
        model.complete(CONVERSATION)
