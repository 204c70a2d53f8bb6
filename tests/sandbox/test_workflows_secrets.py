"""The shipped workflows keep credentials away from what runs agent or branch code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

TEMPLATES = Path(__file__).resolve().parents[2] / "assay" / "github" / "templates" / "workflows"


def _steps(name: str) -> list[dict[str, Any]]:
    workflow = yaml.safe_load((TEMPLATES / name).read_text(encoding="utf-8"))
    return [step for job in workflow["jobs"].values() for step in job["steps"]]


def test_the_step_that_runs_rows_holds_no_credential_in_its_environment() -> None:
    steps = _steps("assay-gate.yml")
    [verify] = [s for s in steps if s.get("name") == "Verify the brief's rows"]
    env = verify.get("env", {})
    assert not any("secrets." in str(v) or "github.token" in str(v) for v in env.values()), env
    assert "GITHUB_TOKEN" not in env and "ASSAY_EVIDENCE_KEY" not in env
    # The credentials arrive as files the gate reads and removes.
    assert "ASSAY_GITHUB_TOKEN_FILE" in verify["run"] and "ASSAY_EVIDENCE_KEY_FILE" in verify["run"]
    handed = [s for s in steps if "secrets.ASSAY_EVIDENCE_KEY" in str(s.get("env", {}))]
    assert len(handed) == 1 and "assay" not in handed[0]["run"].replace("assay-", "")


@pytest.mark.parametrize("name", ["assay-gate.yml", "assay-desk.yml"])
def test_workflows_running_agent_or_branch_code_install_bubblewrap(name: str) -> None:
    runs = "\n".join(str(s.get("run", "")) for s in _steps(name))
    assert "apt-get install" in runs and "bubblewrap" in runs
    assert "apparmor_restrict_unprivileged_userns=0" in runs
