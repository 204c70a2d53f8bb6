"""The README's two commands are the ones users and CI actually run."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import REPO_ROOT, AssayRunner


def _readme_commands() -> list[str]:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```bash\n(.+?)\n```", text, flags=re.DOTALL)


def test_first_command_installs_and_runs_the_demo() -> None:
    first = _readme_commands()[0]
    assert "pip install" in first
    assert first.rstrip().endswith("assay demo")


def test_ci_runs_exactly_the_readme_test_command() -> None:
    second = _readme_commands()[1].strip()
    ci_lines = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert second in [line.strip() for line in ci_lines]


def test_cli_reference_matches_the_click_tree() -> None:
    from assay.cli.main import root
    from assay.cli.reference import END, START, reference_markdown

    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    block = START + text.partition(START)[2].partition(END)[0] + END
    assert block == reference_markdown(root), (
        "README's CLI reference is stale: python -m assay.cli.reference --write README.md"
    )


def test_the_durable_run_example_runs_as_the_readme_says(
    run_assay: AssayRunner, tmp_path: Path
) -> None:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    example = re.findall(r"```python\n(.+?)\n```", text, flags=re.DOTALL)[0]
    (tmp_path / "desk.py").write_text(example, encoding="utf-8")
    first = run_assay("run", "desk.py:main", "--journal", "j", "--input", '{"goal": "hi"}')
    assert first.returncode == 75, first.stderr
    assert run_assay("approve", "--journal", "j").returncode == 0
    done = run_assay("run", "desk.py:main", "--journal", "j", "--input", '{"goal": "hi"}', "--json")
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)["output"]
    assert output["approved"] is True
    assert output["plan"] == {"files": ["a.py"], "goal": "hi"}
    assert run_assay("replay", "--journal", "j", "desk.py:main").returncode == 0
