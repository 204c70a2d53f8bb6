"""What the demo puts on its forge: the example project, its briefs and the demo desk.

The material ships inside the package (``assay/demo/data``) so that the demo runs from any
install. ``seed_forge`` writes the project and the chosen briefs to the forge's main as one
commit, and the desk manifest and its scripted answers to the demo's own folder, where the
desk processes read them with ``--desks``.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

import assay.refs as refs
from assay.briefs import Brief, parse_brief
from assay.errors import UsageError
from assay.forge import Forge
from assay.plumbing import Identity, RefUpdate

DATA = resources.files("assay.demo") / "data"

# The scenario's roles; every other shipped brief is an ordinary one.
CRASH_BRIEF = "reverse-words"
APPROVAL_BRIEF = "title-case"
FORGED_BRIEF = "palindrome"
# The briefs the demo needs for its story, in the order --briefs M takes them.
STORY_ORDER = ("slugify", CRASH_BRIEF, APPROVAL_BRIEF, FORGED_BRIEF, "word-count", "changelog")
MIN_BRIEFS = 4

DEMO_IDENTITY = Identity("assay demo", "demo@assay.invalid")
DESK_MANIFEST = "demo.yaml"


@dataclass(frozen=True)
class Material:
    """The briefs chosen for this demo and the files of main's first commit."""

    briefs: list[Brief]
    files: dict[str, bytes]


def _read_tree(root: resources.abc.Traversable, prefix: str = "") -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for entry in sorted(root.iterdir(), key=lambda item: item.name):
        name = f"{prefix}{entry.name}"
        if entry.is_dir():
            if entry.name != "__pycache__":
                files.update(_read_tree(entry, f"{name}/"))
        else:
            files[name] = entry.read_bytes()
    return files


def choose_briefs(count: int) -> list[Brief]:
    """The first ``count`` briefs of the story (at least the four the scenario needs)."""
    if not MIN_BRIEFS <= count <= len(STORY_ORDER):
        raise UsageError(
            f"--briefs must be between {MIN_BRIEFS} and {len(STORY_ORDER)}: the demo needs "
            f"{', '.join(STORY_ORDER[:MIN_BRIEFS])} for its story (got {count})"
        )
    chosen = []
    for brief_id in STORY_ORDER[:count]:
        text = (DATA / "briefs" / f"{brief_id}.md").read_text(encoding="utf-8")
        chosen.append(parse_brief(text, source=f"briefs/{brief_id}.md"))
    return chosen


def load_material(count: int) -> Material:
    """The project files plus ``briefs/<id>.md`` for each chosen brief."""
    briefs = choose_briefs(count)
    files = _read_tree(DATA / "project")
    for brief in briefs:
        files[f"briefs/{brief.id}.md"] = (DATA / "briefs" / f"{brief.id}.md").read_bytes()
    return Material(briefs=briefs, files=files)


def seed_forge(forge: Forge, material: Material) -> str:
    """Commit the project and the briefs on top of main with one CAS push; the new sha."""
    main = forge.refresh([refs.MAIN]).get(refs.MAIN)
    parents = [main] if main else []
    sha = forge.commit(
        material.files,
        parents=parents,
        message="Add the textkit example project and the demo's briefs",
        author=DEMO_IDENTITY,
    )
    result = forge.push([RefUpdate(refs.MAIN, sha, main)])
    if not result.ok:
        raise UsageError(f"could not seed the demo forge's main: {result.detail}")
    return sha


def real_model() -> dict[str, str] | None:
    """The model section for an OpenAI-compatible endpoint, when ``ASSAY_MODEL_BASE_URL`` is set.

    ``ASSAY_MODEL`` names the model and ``ASSAY_MODEL_API_KEY_ENV`` the variable holding
    its key (the key itself is never written anywhere).
    """
    base_url = os.environ.get("ASSAY_MODEL_BASE_URL")
    if not base_url:
        return None
    return {
        "adapter": "openai",
        "base_url": base_url,
        "model": os.environ.get("ASSAY_MODEL", "gpt-4o-mini"),
        "api_key_env": os.environ.get("ASSAY_MODEL_API_KEY_ENV", "OPENAI_API_KEY"),
    }


def write_workspace(
    directory: Path, *, model: dict[str, str] | None = None, sandboxed: bool = True
) -> None:
    """Copy the demo desk, its scripted answers and the sweeper policies into ``directory``.

    Desk processes read ``desks/`` (``--desks``) and ``assay sweep`` reads ``sweepers/``
    from the folder it runs in, which is the demo's. With ``model``, the desk's scripted
    model is replaced by that section (a real endpoint). Not ``sandboxed`` (no bubblewrap
    on this machine), the desk declares ``sandbox: {network: host, isolation: off}``, so
    its runs are recorded, and shown on the board, as unsandboxed.
    """
    for folder in ("desks", "sweepers"):
        for name, data in _read_tree(DATA / folder).items():
            target = directory / folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    if model is not None or not sandboxed:
        manifest_path = directory / "desks" / DESK_MANIFEST
        manifest = yaml.safe_load(manifest_path.read_text(encoding="utf-8"))
        if model is not None:
            manifest["model"] = model
        if not sandboxed:
            manifest["sandbox"] = {"network": "host", "isolation": "off"}
        manifest_path.write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")


def reset_directory(directory: Path) -> None:
    """Empty the demo folder, refusing to touch one that is not a previous demo's."""
    if directory.exists() and any(directory.iterdir()):
        if not (directory / ".assay-demo").exists():
            raise UsageError(
                f"{directory} is not empty and is not a previous demo's folder; "
                "choose another --dir"
            )
        shutil.rmtree(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / ".assay-demo").write_text("made by assay demo\n", encoding="utf-8")
