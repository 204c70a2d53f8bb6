"""Drive the spin model checker on the claim protocol's model in ``docs/spec/``.

A thin helper for the tests: generate the verifier (``spin -a``), compile it with gcc,
run it, and replay a counterexample trail (``spin -t``) as the model's narrative lines.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

SPEC_DIR = Path(__file__).resolve().parents[2] / "docs" / "spec"

# Verifier memory cap in MB: a model that outgrows it fails loudly instead of swapping.
MEMLIM_MB = 1024


def spin_binary() -> str:
    """The spin executable; fails with the fix when it is missing (never skips)."""
    spin = shutil.which("spin")
    if spin is None:
        raise AssertionError(
            "spin is not installed: run .ci/install (it runs apt-get install spin)"
        )
    return spin


@dataclass(frozen=True)
class PanRun:
    """The outcome of one verifier run."""

    output: str

    @property
    def errors(self) -> int:
        match = re.search(r"errors: (\d+)", self.output)
        assert match, f"no error count in pan output:\n{self.output}"
        return int(match.group(1))

    @property
    def states(self) -> int:
        match = re.search(r"(\d+) states, stored", self.output)
        assert match, f"no state count in pan output:\n{self.output}"
        return int(match.group(1))

    @property
    def complete(self) -> bool:
        """True when the search covered the whole state space it was asked to."""
        return (
            "Search not completed" not in self.output
            and "max search depth too small" not in self.output
            and "reached -DMEMLIM bound" not in self.output
        )


class Verifier:
    """One compiled verifier for one model file and one set of model defines."""

    def __init__(
        self,
        workdir: Path,
        model: str,
        *,
        defines: tuple[str, ...] = (),
        cflags: tuple[str, ...] = (),
        optimize: str = "-O0",
    ) -> None:
        self.workdir = workdir
        self.model = model
        self.defines = defines
        workdir.mkdir(parents=True, exist_ok=True)
        for source in SPEC_DIR.glob("*.pml"):
            shutil.copy(source, workdir / source.name)
        self._run([spin_binary(), "-a", *defines, model], timeout=60)
        self._run(
            [
                "gcc",
                optimize,
                f"-DMEMLIM={MEMLIM_MB}",
                *cflags,
                "-o",
                "pan",
                "pan.c",
            ],
            timeout=180,
        )

    def _run(self, argv: list[str], *, timeout: float) -> str:
        done = subprocess.run(
            argv, cwd=self.workdir, capture_output=True, text=True, timeout=timeout, check=False
        )
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"{argv} failed ({done.returncode}):\n{output}"
        return output

    def check(self, *args: str, timeout: float = 240) -> PanRun:
        """Run the verifier; pan exits 0 whether or not it found errors."""
        (self.workdir / f"{self.model}.trail").unlink(missing_ok=True)
        return PanRun(self._run(["./pan", *args], timeout=timeout))

    def replay(self) -> str:
        """The counterexample of the last check, replayed: the model's printf narrative,
        spin's verdict lines, and the cycle marker of a liveness counterexample."""
        assert (self.workdir / f"{self.model}.trail").exists(), "the verifier left no trail"
        text = self._run([spin_binary(), "-t", *self.defines, self.model], timeout=60)
        keep = []
        for line in text.splitlines():
            stripped = line.strip()
            if (
                stripped.startswith(("desk ", "sweeper ", "time passes", "VIOLATED", "spin:"))
                or "START OF CYCLE" in stripped
            ):
                keep.append(stripped)
        return "\n".join(keep)
