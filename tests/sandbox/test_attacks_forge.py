"""The attacks of issue 14 against the real desk on the embedded forge.

A desk process holds canary credentials (a GitHub token, the model's key, a desk secret,
``ASSAY_MODEL_API_KEY`` which only its name marks as a secret, the evidence key); its model
is the OpenAI-compatible fake. The agent writes ``probe.py`` and runs it with the ``run``
tool; the brief's objective judge and, afterwards, the gate's verify row run the same
probe. Nothing may find a canary, reach a loopback port, write outside the tree or outlive
its call; and no object, log or state file may hold a canary afterwards.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from pathlib import Path

import pytest

from assay.evidence.store import fetch_log
from assay.forge import open_forge
from tests.desks.world import World, brief_text, call
from tests.fakes.openai_server import FakeOpenAIServer
from tests.forge_fixtures import wait_until
from tests.sandbox.probe import (
    CANARIES,
    assert_clean_report,
    assert_no_canary,
    escapee_gone,
    git_dirs,
    host_escapees,
    ok_steps,
    probe_report,
    probe_source,
)

HERE = Path(__file__).resolve().parent


@pytest.mark.slow
def test_run_tool_judge_and_row_find_no_canary_on_the_embedded_forge(world: World) -> None:
    outside = [str(world.root / "escaped-from-probe"), str(HERE / "escaped-from-probe")]
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    configs = [str(world.forge_path / "config"), str(world.root / "machine-a" / "cache" / "config")]
    tag = str(world.root)
    probe = probe_source(tag=tag, port=port, outside_writes=outside, outside_configs=configs)
    responses = [
        {"tool_calls": [call("write_file", path="probe.py", content=probe)]},
        {"tool_calls": [call("run", command="python probe.py")]},
        {
            "tool_calls": [
                call("finish", summary="probed", evidence=[{"row": "probe", "result": "pass"}])
            ]
        },
    ]
    world.add_briefs(
        brief_text(
            "b1",
            verify=[{"id": "probe", "run": "python probe.py", "timeout": 120}],
            objective={"judge": "python probe.py", "max_runs": 1, "timeout": 120},
        )
    )
    with FakeOpenAIServer(responses) as server, listener:
        world.add_desk(
            "coder",
            tools=("write_file", "run", "finish"),
            model={"adapter": "openai", "model": "m", "base_url": server.base_url},
            run={"allow": ["python probe.py"], "timeout_s": 120, "env": list(CANARIES)},
            secrets=["DEPLOY_SECRET"],
            lease=3,
        )
        done = world.assay(
            "desk",
            "run",
            "coder",
            "--once",
            "--json",
            "--forge",
            world.url,
            "--desks",
            str(world.desks),
            extra=CANARIES,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert server.count == 3
        tree = world.root / "machine-a" / "work" / "coder" / "b1"
        outputs = dict(ok_steps(tree / ".assay" / "journal" / "b1"))
        # The agent's run tool, then the objective judge (in its own clone of the branch).
        tool = probe_report(outputs["run"]["output"])
        assert_clean_report(tool, outside)
        judge = probe_report(outputs["objective.judge"]["tail"])
        assert_clean_report(judge, outside)
        assert escapee_gone(tree) and host_escapees(tag) == []
        # The gate's row, run by `assay verify` holding the same canaries.
        verified = world.assay("verify", "b1", "--forge", world.url, "--json", extra=CANARIES)
        assert verified.returncode in (0, 1), verified.stdout + verified.stderr
        assert host_escapees(tag) == []
        with open_forge(world.url, cache_dir=world.root / "verify-cache") as forge:
            [record] = fetch_log(forge, "b1").records
        row = probe_report(record.output_tail)
        assert_clean_report(row, outside)
    wait_until(lambda: not host_escapees(tag), timeout=5, what="no escapee")
    # Nothing durable holds a canary in any common form: no object of any repository (the
    # forge, every cache, every work tree), no file (logs, state, journals), no output.
    assert_no_canary(
        repos=git_dirs(world.root),
        trees=[world.root],
        texts=[done.stdout, done.stderr, verified.stdout, verified.stderr],
    )


def test_the_probe_finds_every_attack_when_nothing_confines_it(tmp_path: Path) -> None:
    # The control: run unsandboxed (isolation off, as a user may declare), the same probe
    # sees the canaries, reaches the port and writes outside, so its clean reports above
    # are the sandbox's doing.
    from assay.sandbox import SandboxSpec, run_sandboxed

    tree = tmp_path / "tree"
    tree.mkdir()
    outside = [str(tmp_path / "escaped")]
    with socket.create_server(("127.0.0.1", 0)) as listener:
        probe = probe_source(
            tag=str(tmp_path),
            port=listener.getsockname()[1],
            outside_writes=outside,
            outside_configs=[],
            scan_s=0.1,
            walk=str(tree),
        )
        (tree / "probe.py").write_text(probe)
        result = run_sandboxed(
            [sys.executable, "probe.py"],
            cwd=tree,
            env={"PATH": "/usr/bin:/bin", **CANARIES},
            spec=SandboxSpec(network="host", isolation="off"),
            timeout_s=120,
            max_output_bytes=64_000,
        )
    escaped = host_escapees(str(tmp_path))
    for pid in escaped:
        os.kill(pid, signal.SIGKILL)
    report = probe_report(result.output())
    assert any(where.endswith("/environ") for where in report["found"])
    assert report["connected"] is True and report["wrote"] == outside
    # Unconfined or not, nothing the call started outlives it: the runner's warden, a child
    # subreaper, kills the setsid'd double-fork too (the defect this control once showed).
    assert not escaped, "even unconfined, the setsid double-fork dies with the call"
    assert not result.sandboxed
