"""Fixtures shared by every test area: running the real ``assay`` CLI in a subprocess."""

from __future__ import annotations

import compileall
import os
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

pytest_plugins = ["tests.forge_fixtures"]

REPO_ROOT = Path(__file__).resolve().parent.parent

# The suite is the same wherever it runs: settings a CI runner or a developer's shell may
# carry (a GitHub Actions job's GITHUB_RUN_ID would stamp every claim with a workflow run,
# an exported ASSAY_GATE_PUBLIC_KEY would change which key every reader trusts) never reach
# the tests or the processes they start. A test that wants one sets it itself.
for _name in [n for n in os.environ if n.startswith(("GITHUB_", "ASSAY_", "RUNNER_"))]:
    del os.environ[_name]

AssayRunner = Callable[..., subprocess.CompletedProcess[str]]


def pytest_sessionstart(session: pytest.Session) -> None:
    """Byte-compile this checkout once, before any test starts a child process.

    The suite starts ``python -m assay`` (and the ``tests`` helpers) in thousands of child
    processes. In a fresh checkout, or with ``PYTHONDONTWRITEBYTECODE`` set (as on the shared
    development machine), each child compiled every module it imported from source again: a
    desk run spent a fifth of its CPU in the compiler. ``compileall`` writes the
    ``__pycache__`` files Python itself would write (gitignored) whatever that variable says,
    and skips the ones already up to date. The xdist controller does it before it starts
    the workers, so the workers have nothing left to do.
    """
    if hasattr(session.config, "workerinput"):
        return
    for package in ("assay", "tests"):
        # Not the demo's project (data the demo copies into its forge, not code we import).
        compileall.compile_dir(REPO_ROOT / package, quiet=2, rx=re.compile(r"/data/"))


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist deals the files out in the order of the collection below, not reordered
    # by test count (its default put the fewest-test files last, and those are the slowest:
    # the demo, the torture runs, mypy).
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files holding a test marked ``slow`` first, then the others, most tests first.

    With ``--dist loadfile`` a file runs whole on one worker, and a worker takes the next
    file as it runs out. Started last, one 30-second file kept a worker busy while the other
    sat idle; started first, the slow files are spread over both workers and the suite ends
    on a queue of short files. A file's tests keep their order (module fixtures hold), and
    the order is the same on every worker, as xdist requires.
    """
    by_file: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_file.setdefault(item.nodeid.split("::", 1)[0], []).append(item)

    def weight(name: str) -> tuple[bool, int]:
        tests = by_file[name]
        return (not any(test.get_closest_marker("slow") for test in tests), -len(tests))

    items[:] = [item for name in sorted(by_file, key=weight) for item in by_file[name]]


def assay_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for an ``assay`` subprocess: this checkout first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env.setdefault("NO_COLOR", "1")
    env["COLUMNS"] = "200"
    if extra:
        env.update(extra)
    return env


def assay_argv(*args: str) -> list[str]:
    """argv for the CLI in a child process (``python -m assay`` of this checkout)."""
    return [sys.executable, "-m", "assay", *args]


@pytest.fixture
def run_assay(tmp_path: Path) -> AssayRunner:
    """Run ``assay ARGS`` to completion in a subprocess and return the finished process."""

    def runner(
        *args: str,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        input: str | None = None,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            assay_argv(*args),
            cwd=cwd or tmp_path,
            env=assay_env(env),
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return runner


def popen_assay(
    args: Sequence[str], *, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """Start ``assay ARGS`` without waiting, for tests that kill or race processes."""
    return subprocess.Popen(
        assay_argv(*args),
        cwd=cwd,
        env=assay_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
