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

import json
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from assay.errors import BadInput

TEMPLATES = Path(__file__).resolve().parent / "templates"
GATE_SECRET = "ASSAY_EVIDENCE_KEY"  # read by the gate and events jobs only
# The GitHub Environment that holds GATE_SECRET, deployable from main alone: a job naming
# it on any other ref (a workflow file a branch changed, dispatched there) is refused the
# environment, and with it the key, by GitHub before it starts.
GATE_ENVIRONMENT = "assay-gate"
EXAMPLE_DESK = "example"  # desks/example.yaml: the scripted desk that runs offline
EXAMPLE_BRIEF = "briefs/example-add-function.md"
_RENAMED = {"workflows": ".github/workflows"}
CLI_DESKS = (
    "claude-code",
    "codex",
    "gemini-cli",
    "qwen-code",
    "opencode",
    "aider",
    "mini-swe-agent",
)  # templates/cli/<profile>.yaml, written with --cli
# The ruleset a repository needs beside the workflows: main cannot be deleted or rewound,
# and a pull request merges (or a push lands) only with the gate's check green, from the
# GitHub Actions app: a look-alike `assay/evidence` check another app installed on the
# repository makes does not count. (Rulesets do not cover custom refs; the gate fails
# closed when one of them is deleted: docs/github.md.)
GITHUB_ACTIONS_APP_ID = 15368
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
                "required_status_checks": [
                    {"context": "assay/evidence", "integration_id": GITHUB_ACTIONS_APP_ID}
                ],
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


@dataclass(frozen=True)
class NextSteps:
    """What to do after ``assay init``, for the forge it was given: ``github`` (the
    workflows run the desks; set the gate's secret and protect main) or ``embedded``
    (file the example brief, run a desk, gate it and draw the board from this machine)."""

    forge: str  # "github" | "embedded"
    spec: str  # the forge as given ("" when none was)
    lines: tuple[str, ...]  # what ``assay init`` prints, in order
    commands: tuple[str, ...]  # the shell commands among them, for --json

    def to_json(self) -> dict[str, object]:
        return {"forge": self.forge, "spec": self.spec, "commands": list(self.commands)}


def next_steps(target: Path, forge: str | None) -> NextSteps:
    """The next step after writing the starter set into ``target`` (``BadInput`` naming
    ``--forge`` for a local path that is no git repository)."""
    spec = (forge or "").strip()
    if not spec or spec.startswith("github:"):
        return _github_steps(spec)
    _check_local_forge(spec)
    quoted, where = shlex.quote(spec), shlex.quote(str(target))
    commands = (
        f"assay brief add {where}/{EXAMPLE_BRIEF} --forge {quoted}",
        f"assay desk run {EXAMPLE_DESK} --forge {quoted} --desks {where}/desks --once",
        f"assay verify example-add-function --forge {quoted}",
        f"assay board --forge {quoted}",
    )
    lines = (
        f"next, on the embedded forge {spec} (the desks run on this machine, the gate's key "
        "is the one `assay forge init` made):",
        f"  {commands[0]}    # file the example brief on main",
        f"  {commands[1]}    # a desk takes it and opens a review",
        f"  {commands[2]}    # the gate re-runs its verify rows",
        f"  {commands[3]}    # BOARD.md and board.html",
    )
    return NextSteps("embedded", spec, lines, commands)


def _github_steps(spec: str) -> NextSteps:
    repo = spec.removeprefix("github:").strip() if spec else ""
    on_repo = f" --repo {repo}" if repo else ""
    environments = f"repos/{repo or 'OWNER/REPO'}/environments/{GATE_ENVIRONMENT}"
    environment = (
        f"gh api -X PUT {environments}"
        " -F 'deployment_branch_policy[protected_branches]=false'"
        " -F 'deployment_branch_policy[custom_branch_policies]=true'"
    )
    main_only = (
        f"gh api -X POST {environments}/deployment-branch-policies -f name=main -f type=branch"
    )
    secret = f"openssl rand -hex 32 | gh secret set {GATE_SECRET} --env {GATE_ENVIRONMENT}{on_repo}"
    ruleset = (
        f"gh api -X POST repos/{repo or 'OWNER/REPO'}/rulesets --input - <<'JSON'\n"
        f"{json.dumps(MAIN_RULESET)}\nJSON"
    )
    lines: tuple[str, ...] = (
        f"next, on GitHub{' (' + repo + ')' if repo else ''}: commit and push these files;",
        f"the gate signs evidence with the secret {GATE_SECRET}, kept in the environment "
        f"{GATE_ENVIRONMENT} that only main may deploy from (the gate and events jobs name "
        "it): make the environment with a deployment branch rule of main, then set the "
        f"secret there, once:\n{environment}\n{main_only}\n{secret}",
        "protect main with the gate's check (GitHub's rulesets API; --json prints the body):\n"
        + ruleset,
    )
    if not spec:
        lines += ("(an embedded forge instead: `assay init --forge PATH` prints its next steps)",)
    return NextSteps("github", spec, lines, (environment, main_only, secret, ruleset))


def _check_local_forge(spec: str) -> None:
    """A forge given as a path (or ``file://``) must be a git repository already."""
    parsed = urlparse(spec)
    if parsed.scheme not in ("", "file"):
        return  # a served forge (http, git, ssh): reached when the steps run, not now
    path = Path(parsed.path if parsed.scheme == "file" else spec).expanduser()
    if not ((path / "HEAD").is_file() or (path / ".git").exists()):
        raise BadInput(
            f"--forge {spec}: not a git repository (make one with `assay forge init {spec}`)",
            flag="--forge",
        )
