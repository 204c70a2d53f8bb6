"""``assay init``: the starter set a repository needs to run desks on GitHub.

The files live as package data under ``assay/github/templates/`` (so they ship in the wheel):
``workflows/*.yml`` go to ``.github/workflows/``; ``desks/``, ``briefs/``, ``sweepers/`` and
``board_templates/`` keep their paths. The starter desks, briefs, sweepers and board templates
are this repository's own (a test keeps the copies identical), so ``assay init`` writes what
Assay dogfoods.

Nothing is overwritten without ``force``: every target is checked before the first write, so
a refusal leaves the repository exactly as it was. A file already holding the template's exact
bytes is left alone and reported ``unchanged``, which makes ``assay init`` safe to run twice.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from assay.errors import BadInput

TEMPLATES = Path(__file__).resolve().parent / "templates"
_RENAMED = {"workflows": ".github/workflows"}
CLI_DESKS = ("claude-code", "codex")  # templates/cli/<profile>.yaml, written with --cli
# The ruleset a repository needs beside the workflows: main cannot be deleted or rewound,
# and a pull request merges only with the gate's check green. (Rulesets do not cover
# custom refs; the gate fails closed when one of them is deleted: docs/github.md.)
MAIN_RULESET: dict[str, object] = {
    "name": "assay: main needs the gate",
    "target": "branch",
    "enforcement": "active",
    "conditions": {"ref_name": {"include": ["~DEFAULT_BRANCH"], "exclude": []}},
    "rules": [
        {"type": "deletion"},
        {"type": "non_fast_forward"},
        {
            "type": "required_status_checks",
            "parameters": {
                "strict_required_status_checks_policy": False,
                "required_status_checks": [{"context": "assay/evidence"}],
            },
        },
    ],
}


@dataclass
class InitResult:
    """What ``init_repository`` did, one list per outcome, paths relative to the target."""

    target: Path
    written: list[str] = field(default_factory=list)
    overwritten: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    def rows(self) -> list[dict[str, str]]:
        rows = [{"path": p, "action": "written"} for p in self.written]
        rows += [{"path": p, "action": "overwritten"} for p in self.overwritten]
        rows += [{"path": p, "action": "unchanged"} for p in self.unchanged]
        return sorted(rows, key=lambda row: row["path"])


def starter_files() -> dict[str, Path]:
    """Target path (relative, POSIX) -> the packaged template it is copied from."""
    plan: dict[str, Path] = {}
    for source in sorted(TEMPLATES.rglob("*")):
        if not source.is_file() or "__pycache__" in source.parts:
            continue
        relative = source.relative_to(TEMPLATES).as_posix()
        top, _, rest = relative.partition("/")
        if top == "cli":  # agent CLI desks: only when asked for (cli_desk_file)
            continue
        plan[f"{_RENAMED.get(top, top)}/{rest}"] = source
    return plan


def cli_desk_file(profile: str) -> tuple[str, Path]:
    """``(desks/<profile>.yaml, its template)`` for ``assay init --cli PROFILE``."""
    if profile not in CLI_DESKS:
        raise BadInput(f"--cli: no starter desk for {profile!r} (known: {', '.join(CLI_DESKS)})")
    return f"desks/{profile}.yaml", TEMPLATES / "cli" / f"{profile}.yaml"


def init_repository(target: Path, *, force: bool = False, cli: str | None = None) -> InitResult:
    """Write the starter set into ``target`` (with ``cli``, also that agent CLI's desk);
    ``BadInput`` names the first file in the way."""
    if target.exists() and not target.is_dir():
        raise BadInput(f"{target}: not a directory")
    plan = starter_files()
    if cli is not None:
        relative, source = cli_desk_file(cli)
        plan[relative] = source
    result = InitResult(target=target)
    pending: list[tuple[str, Path, bool]] = []
    for relative, source in plan.items():
        destination = target / relative
        if destination.is_symlink() or (destination.exists() and not destination.is_file()):
            raise BadInput(f"{destination}: exists and is not a regular file; not touched")
        if destination.exists():
            if destination.read_bytes() == source.read_bytes():
                result.unchanged.append(relative)
                continue
            if not force:
                raise BadInput(
                    f"{destination}: already exists and differs from Assay's starter file; "
                    "nothing was written (use --force to overwrite)",
                    path=str(destination),
                )
        pending.append((relative, source, destination.exists()))
    for relative, source, existed in pending:
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        tmp = destination.with_name(f".{destination.name}.assay-init")
        tmp.write_bytes(source.read_bytes())
        os.replace(tmp, destination)
        (result.overwritten if existed else result.written).append(relative)
    return result
