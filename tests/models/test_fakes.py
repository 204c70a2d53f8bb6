"""The fake model servers other areas build on: holding calls, process mode, by-count mode."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from assay.models import ModelReply, build_model
from tests.conftest import REPO_ROOT, assay_env
from tests.fakes import FakeOpenAIServer

RESPONSES = [{"content": "one"}, {"content": "two"}]


def model(url: str, tmp_path: Path) -> Any:
    return build_model({"adapter": "openai", "model": "m", "base_url": url}, base_dir=tmp_path)


def test_hold_keeps_a_call_in_flight_until_release(tmp_path: Path) -> None:
    with FakeOpenAIServer(RESPONSES) as server:
        server.hold()
        replies: list[ModelReply] = []
        caller = threading.Thread(
            target=lambda: replies.append(
                model(server.base_url, tmp_path).complete([{"role": "user", "content": "x"}])
            )
        )
        caller.start()
        server.wait_for_in_flight(1, timeout=30)
        assert server.count == 0 and replies == []
        server.release()
        caller.join(timeout=30)
        assert [r.message["content"] for r in replies] == ["one"]
        assert server.count == 1


def test_by_count_answers_in_arrival_order(tmp_path: Path) -> None:
    with FakeOpenAIServer(RESPONSES, by="count") as server:
        adapter = model(server.base_url, tmp_path)
        same = [{"role": "user", "content": "x"}]
        assert adapter.complete(same).message["content"] == "one"
        assert adapter.complete(same).message["content"] == "two"


def test_the_server_runs_as_a_process(tmp_path: Path) -> None:
    script = REPO_ROOT / "desks" / "scripts" / "example.yaml"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes", "openai", str(script)],
        cwd=REPO_ROOT,
        env=assay_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        reply = model(url, tmp_path).complete([{"role": "user", "content": "go"}])
        assert reply.tool_calls[0]["function"]["name"] == "write_file"
        assert proc.stderr.readline().strip() == "count=1"
    finally:
        proc.kill()
        proc.communicate(timeout=30)
