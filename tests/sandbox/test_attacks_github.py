"""The attacks of issue 14 against the real desk on the fake GitHub.

The desk (``assay desk run``, a subprocess) holds the canary GitHub token; its heartbeat
pushes the claim over smart HTTP every second while the agent's probe scans every
``/proc/*/cmdline`` and ``environ`` it can see for the token and the ``Authorization``
header built from it (before this issue, git's argv carried it). Nothing may find it, and
no object of the GitHub repository, the desk's cache or its work tree may hold it.
"""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import httpx
import pytest
import yaml

from assay.forge.budget import WINDOW_ENV
from tests.conftest import AssayRunner
from tests.github.fake_github import BOT, TEST_WINDOW_S, FakeGitHub
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
TOKEN = CANARIES["GITHUB_TOKEN"]


def _open_issue(fake: FakeGitHub, body: str) -> int:
    with httpx.Client(
        base_url=fake.api_url,
        headers={"Authorization": "Bearer ghp-maintainer", "User-Agent": "a-person"},
        timeout=10,
    ) as gh:
        made = gh.post(
            f"/repos/{fake.slug}/issues", json={"title": "Probe", "body": body, "labels": ["assay"]}
        )
        assert made.status_code == 201, made.text
        return int(made.json()["number"])


@pytest.mark.slow
def test_the_github_token_is_nowhere_the_agent_can_look(
    tmp_path: Path, run_assay: AssayRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The heartbeat pushes every second: GitHub's minute of 6 pushes, shortened to keep pace.
    monkeypatch.setenv(WINDOW_ENV, TEST_WINDOW_S)
    outside = [str(tmp_path / "escaped-from-probe"), str(HERE / "escaped-from-probe")]
    state = tmp_path / "state"
    with (
        FakeGitHub(
            tmp_path / "github", tokens={TOKEN: BOT, "ghp-maintainer": "maintainer"}
        ) as fake,
        socket.create_server(("127.0.0.1", 0)) as listener,
    ):
        fake.seed_main({"README.md": "widgets\n"})
        issue = (
            "---\nverify:\n  - id: probe\n    run: python probe.py\n    timeout: 120\n---\nProbe.\n"
        )
        number = _open_issue(fake, issue)
        probe = probe_source(
            tag=str(tmp_path),
            port=listener.getsockname()[1],
            outside_writes=outside,
            outside_configs=[str(fake.bare / "config")],
            scan_s=4.0,  # long enough for several heartbeat pushes
        )
        desks = tmp_path / "desks"
        (desks / "scripts").mkdir(parents=True)
        responses = [
            {
                "tool_calls": [
                    {"name": "write_file", "arguments": {"path": "probe.py", "content": probe}}
                ]
            },
            {"tool_calls": [{"name": "run", "arguments": {"command": "python probe.py"}}]},
            {
                "tool_calls": [
                    {"name": "finish", "arguments": {"summary": "probed", "evidence": []}}
                ]
            },
        ]
        (desks / "scripts" / "coder.json").write_text(json.dumps({"responses": responses}))
        manifest = {
            "name": "coder",
            "kind": "agent",
            "takes": {"globs": ["*"]},
            "model": {"adapter": "scripted", "script": "scripts/coder.json"},
            "tools": ["write_file", "run", "finish"],
            "run": {"allow": ["python probe.py"], "timeout_s": 120},
            "lease": 3,  # a heartbeat push every second
        }
        (desks / "coder.yaml").write_text(yaml.safe_dump(manifest))
        env = {
            **CANARIES,
            "GITHUB_API_URL": fake.api_url,
            "ASSAY_STATE": str(state),
            "ASSAY_GITHUB_WRITE_SPACING": "0",
        }
        # The events job: the maintainer's label fixes the issue's text as the brief.
        accepted = run_assay(
            "github",
            "events",
            "--forge",
            f"github:{fake.slug}",
            env={**env, "ASSAY_STATE": str(tmp_path / "events-state")},
        )
        assert accepted.returncode == 0, accepted.stdout + accepted.stderr
        done = run_assay(
            "desk",
            "run",
            "coder",
            "--once",
            "--json",
            "--forge",
            f"github:{fake.slug}",
            "--desks",
            str(desks),
            env=env,
            timeout=240,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        brief = f"issue-{number}"
        trees = [p.parents[3] for p in state.rglob(f"journal/{brief}/000001.jsonl")]
        assert len(trees) == 1
        journal_dir = trees[0] / ".assay" / "journal" / brief
        [run] = [out for name, out in ok_steps(journal_dir) if name == "run"]
        report = probe_report(run["output"])
        assert report["rounds"] > 10
        assert_clean_report(report, outside)
        assert escapee_gone(trees[0]) and host_escapees(str(tmp_path)) == []
        # The claim was renewed during the probe: pushes really happened meanwhile.
        assert fake.ref(f"refs/assay/claims/{brief}") is not None
        # The gate, as the shipped workflow runs it: the token and the evidence key arrive
        # as files it reads and removes; the row runs the same probe.
        token_file, key_file = tmp_path / "token", tmp_path / "key"
        token_file.write_text(TOKEN)
        key_file.write_text(CANARIES["ASSAY_EVIDENCE_KEY"])
        gate_env = {
            "GITHUB_API_URL": fake.api_url,
            "ASSAY_STATE": str(tmp_path / "gate-state"),
            "ASSAY_GITHUB_TOKEN_FILE": str(token_file),
            "ASSAY_EVIDENCE_KEY_FILE": str(key_file),
        }
        verified = run_assay(
            "verify", brief, "--json", "--forge", f"github:{fake.slug}", env=gate_env, timeout=240
        )
        assert verified.returncode in (0, 1), verified.stdout + verified.stderr
        assert not token_file.exists() and not key_file.exists()
        shown = subprocess.run(
            ["git", "show", f"refs/assay/evidence/{brief}:record.json"],
            cwd=fake.bare,
            capture_output=True,
            check=True,
        )
        record = json.loads(shown.stdout)
        assert record["sig"], "the key from the file signed the record"
        assert_clean_report(probe_report(record["output_tail"]), outside)
        assert host_escapees(str(tmp_path)) == []
        assert_no_canary(
            repos=[fake.bare, *git_dirs(state)],
            trees=[state, tmp_path / "gate-state", desks],
            texts=[done.stdout + done.stderr + verified.stdout + verified.stderr],
        )
    assert not fake.violations, fake.violations
