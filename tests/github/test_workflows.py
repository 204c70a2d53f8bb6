"""The workflows lint clean and hold Assay's security rules for GitHub Actions."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from assay.github.init import GATE_ENVIRONMENT, TEMPLATES
from tests.conftest import REPO_ROOT

WORKFLOWS = REPO_ROOT / ".github" / "workflows"
FILES = sorted(WORKFLOWS.glob("*.yml"))
BIN = Path(sys.executable).parent
EXPECTED = {
    "assay-board.yml",
    "assay-desk.yml",
    "assay-events.yml",
    "assay-gate.yml",
    "assay-sweep.yml",
    "ci.yml",
}
PINNED = re.compile(r"uses:\s*[\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+(\.\d+)*\s*$")


def load(path: Path) -> dict[str, Any]:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


def actionlint(*paths: Path) -> subprocess.CompletedProcess[str]:
    assert shutil.which("shellcheck"), "shellcheck must be installed (apt-get install shellcheck)"
    return subprocess.run(
        [
            str(BIN / "actionlint"),
            "-shellcheck",
            shutil.which("shellcheck") or "",
            *map(str, paths),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_expected_workflows_exist() -> None:
    assert {path.name for path in FILES} == EXPECTED


def test_actionlint_with_shellcheck_passes_on_every_workflow() -> None:
    done = actionlint(*FILES)
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_really_runs_shellcheck(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: push\njobs:\n  j:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: echo $UNQUOTED\n"
    )
    done = actionlint(bad)
    assert done.returncode != 0 and "SC2086" in done.stdout


def test_check_jsonschema_accepts_every_workflow() -> None:
    done = subprocess.run(
        [
            str(BIN / "check-jsonschema"),
            "--builtin-schema",
            "vendor.github-workflows",
            *map(str, FILES),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_expression_text_inside_run_blocks(path: Path) -> None:
    for name, job in load(path)["jobs"].items():
        for step in job.get("steps", []):
            script = step.get("run", "")
            assert "${{ github.event" not in script, f"{path.name}:{name}: {script!r}"
            # Stricter: no expression at all in a script; values travel through env:.
            assert "${{" not in script, f"{path.name}:{name}: {script!r}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_action_is_pinned_to_a_commit(path: Path) -> None:
    uses = [line.strip(" -") for line in path.read_text().splitlines() if "uses:" in line]
    assert uses
    for line in uses:
        assert PINNED.match(line), f"{path.name}: {line!r} is not pinned to a full SHA + version"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_permissions_are_least_privilege_per_job(path: Path) -> None:
    workflow = load(path)
    assert workflow["permissions"] == {}, "the workflow default must grant nothing"
    for name, job in workflow["jobs"].items():
        granted = job.get("permissions")
        assert isinstance(granted, dict), f"{path.name}:{name} must declare its permissions"
        assert "write-all" not in str(granted)
        if path.name != "assay-gate.yml":
            assert granted.get("checks") != "write", f"{path.name}:{name} must not write checks"
    if path.name == "assay-gate.yml":
        assert workflow["jobs"]["verify"]["permissions"]["checks"] == "write"


def test_desk_runs_one_concurrency_group_per_desk_and_brief() -> None:
    desk = load(WORKFLOWS / "assay-desk.yml")
    group = desk["concurrency"]["group"]
    assert "inputs.desk" in group and "inputs.brief" in group
    assert desk["concurrency"]["cancel-in-progress"] is False
    triggers = desk[True]  # YAML 1.1 reads the bare key `on` as True
    assert {"workflow_dispatch", "schedule", "issues"} <= set(triggers)
    scripts = [step.get("run", "") for step in desk["jobs"]["desk"]["steps"]]
    assert any('desk run "$DESK" --once' in script for script in scripts)
    assert "assay github sync" in scripts[-1]


def test_event_payload_text_reaches_scripts_only_through_env() -> None:
    events = load(WORKFLOWS / "assay-events.yml")
    assert set(events[True]) == {
        "issue_comment",
        "issues",
        "pull_request_review",
        "workflow_dispatch",
    }
    step = events["jobs"]["wake"]["steps"][-1]
    assert "assay github events --dispatch assay-desk.yml" in step["run"]
    assert not any(
        "actions/checkout" in str(s.get("uses")) for s in events["jobs"]["wake"]["steps"]
    )
    assert not any("comment.body" in str(value) for value in step["env"].values())


def test_ci_runs_the_projects_one_test_command() -> None:
    ci = load(WORKFLOWS / "ci.yml")
    assert ci["jobs"]["test"]["steps"][-1]["run"] == "bash .ci/run"


@pytest.mark.parametrize("name", sorted(EXPECTED - {"ci.yml"}))
def test_shipped_workflows_are_the_ones_assay_init_writes(name: str) -> None:
    template = TEMPLATES / "workflows" / name
    assert template.read_bytes() == (WORKFLOWS / name).read_bytes()


# A token holding `actions: write` can dispatch a workflow on any ref, and `python` puts the
# current directory first on its import path: a brief's branch with a `pip/` or `yaml.py`
# would run its code in the step. These rules keep a desk from turning the gate against it.
_PYTHON = re.compile(r"(?<![\w./-])python3?(?:\.\d+)?(?=[ \t]|$)(?P<rest>[^\n]*)", re.MULTILINE)


def _jobs() -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path.name, name, job)
        for path in FILES
        if path.name != "ci.yml"
        for name, job in load(path)["jobs"].items()
    ]


def test_the_gate_runs_on_main_only_and_checks_out_nothing() -> None:
    gate = load(WORKFLOWS / "assay-gate.yml")
    assert set(gate["jobs"]) == {"verify"}
    job = gate["jobs"]["verify"]
    assert job["if"] == "github.ref == 'refs/heads/main'"
    # `assay verify` fetches the brief's head into a fresh tree of its own; the workspace,
    # where every step runs, holds no file of the dispatched ref or of the brief.
    assert not any("actions/checkout" in str(step.get("uses")) for step in job["steps"])


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_python_runs_with_the_current_directory_on_its_path(path: Path) -> None:
    for name, job in load(path)["jobs"].items():
        for step in job.get("steps", []):
            for match in _PYTHON.finditer(step.get("run", "")):
                assert match["rest"].split()[:1] == ["-I"], f"{path.name}:{name}: {match[0]!r}"


def test_the_python_rule_catches_what_it_should() -> None:
    found = [m["rest"].split()[:1] for m in _PYTHON.finditer("python -m pip\nx=$(python - <<X")]
    assert found == [["-m"], ["-"]]
    assert not list(_PYTHON.finditer("setup-python python-version ./python.sh"))


def test_only_jobs_whose_work_is_a_dispatch_hold_actions_write() -> None:
    holders = {
        (file, name)
        for file, name, job in _jobs()
        if job.get("permissions", {}).get("actions") == "write"
    }
    assert holders == {
        ("assay-desk.yml", "gate"),
        ("assay-events.yml", "review"),
        ("assay-events.yml", "wake"),
        ("assay-sweep.yml", "sweep"),
    }
    for file, name, job in _jobs():
        if (file, name) not in holders:
            continue
        scripts = "\n".join(str(step.get("run", "")) for step in job["steps"])
        dispatches = ("--dispatch", "assay sweep", "gh workflow run")
        assert any(word in scripts for word in dispatches), (file, name)
        # No desk code and no gate rows run where a dispatch can be made.
        assert "desk run" not in scripts and "assay verify" not in scripts, (file, name)
        checkouts = [s for s in job["steps"] if "actions/checkout" in str(s.get("uses"))]
        assert all("ref" not in (s.get("with") or {}) for s in checkouts), (file, name)


_KEY = re.compile(r"\$\{\{\s*secrets\.ASSAY_EVIDENCE_KEY\s*\}\}")


def test_every_job_reading_the_evidence_key_names_its_environment() -> None:
    """The key is a secret of an environment only main deploys from (``assay init`` says
    to make it so): a job that reads it must name the environment, and only such jobs
    may name it."""
    readers = {(file, name) for file, name, job in _jobs() if _KEY.search(yaml.safe_dump(job))}
    assert readers == {("assay-gate.yml", "verify"), ("assay-events.yml", "wake")}
    for file, name, job in _jobs():
        named = job.get("environment")
        if (file, name) in readers:
            assert named == GATE_ENVIRONMENT, (file, name, named)
        else:
            assert named is None, (file, name, named)
    for path in FILES:  # the key reaches nothing but those jobs' steps
        text = yaml.safe_dump({k: v for k, v in load(path).items() if k != "jobs"})
        assert "ASSAY_EVIDENCE_KEY" not in text, path.name


def test_the_review_trigger_runs_no_job_holding_the_key() -> None:
    """A review's run is on the pull request's merge ref, which the environment refuses:
    the job it starts holds no key and dispatches the events job on main."""
    jobs = load(WORKFLOWS / "assay-events.yml")["jobs"]
    assert "pull_request_review" not in jobs["wake"]["if"]
    review = jobs["review"]
    assert "github.event_name == 'pull_request_review'" in review["if"]
    assert review["permissions"] == {"actions": "write"} and "environment" not in review
    (step,) = review["steps"]
    assert step["run"].startswith("gh workflow run assay-events.yml ")
    assert not _KEY.search(yaml.safe_dump(review))


# The rule above, by behaviour: the shipped steps themselves, run in a checkout whose
# `pip/` and `yaml.py` are canaries that leave a mark when imported.
_CANARY = (
    "import os\nopen(os.environ['CANARY'], 'a').write(__name__ + '\\n')\nraise SystemExit(3)\n"
)


def _python_steps() -> list[tuple[str, str, str]]:
    """Every step of the shipped workflows that runs Python: (file, step name, script)."""
    return [
        (path.name, str(step.get("name") or ""), str(step["run"]))
        for path in FILES
        if path.name != "ci.yml"
        for job in load(path)["jobs"].values()
        for step in job.get("steps", [])
        if _PYTHON.search(str(step.get("run", "")))
    ]


def _run_step(
    script: str, checkout: Path, canary: Path, *, drop_isolation: bool = False
) -> subprocess.CompletedProcess[str]:
    if drop_isolation:
        script = script.replace("python -I ", "python ")
    env = {
        "PATH": f"{BIN}:/usr/bin:/bin",
        "HOME": str(checkout.parent),
        "CANARY": str(canary),
        # Already installed, with no index: pip runs its whole install path, changes nothing.
        "ASSAY_INSTALL": "pyyaml",
        "DESK": "example",
        "PIP_NO_INDEX": "1",
    }
    return subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_checkouts_pip_and_yaml_never_run_in_a_workflow_step(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    (checkout / "pip").mkdir(parents=True)
    (checkout / "pip" / "__init__.py").write_text(_CANARY)
    (checkout / "yaml.py").write_text(_CANARY)
    (checkout / "desks").mkdir()
    (checkout / "desks" / "example.yaml").write_text("kind: python\n")
    canary = tmp_path / "canary.log"
    steps = _python_steps()
    scripts = {script for _, _, script in steps}
    assert any("-m pip install" in s for s in scripts) and any("yaml" in s for s in scripts)
    # Each distinct script once (every workflow installs Assay with the same line).
    for script, (file, name) in {script: (f, n) for f, n, script in steps}.items():
        done = _run_step(script, checkout, canary)
        assert done.returncode == 0, (file, name, done.stdout + done.stderr)
        assert not canary.exists(), (file, name, canary.read_text())
    # The canaries are live: the same steps without -I import them.
    for module, script in (("pip", "-m pip install"), ("yaml", "yaml")):
        chosen = next(s for s in scripts if script in s)
        done = _run_step(chosen, checkout, canary, drop_isolation=True)
        assert done.returncode != 0 and canary.read_text().split() == [module], done.stderr
        canary.unlink()


def test_every_job_running_assay_caps_its_waits_under_its_timeout() -> None:
    """A command's waits for GitHub (rate limits, the push and merge budgets) are capped in
    all (``ASSAY_GITHUB_MAX_TOTAL_WAIT``); each job sets the cap under its own timeout, so
    a long desk run is not stopped by the default meant for the shortest job, and no job is
    cut off by GitHub mid-write."""
    capped = 0
    for file, name, job in _jobs():
        runs = " ".join(str(step.get("run", "")) for step in job.get("steps", []))
        if not re.search(r"(?<![\w/.-])assay [a-z]", runs):
            continue
        cap = float(job.get("env", {}).get("ASSAY_GITHUB_MAX_TOTAL_WAIT", 0))
        assert 0 < cap < job["timeout-minutes"] * 60, (file, name, cap)
        capped += 1
    assert capped >= 6  # board, desk (desk and gate jobs), events, gate, sweep
