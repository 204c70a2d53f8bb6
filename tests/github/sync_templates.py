"""Refresh the starter files ``assay init`` ships from this repository's own copies.

``assay/github/templates/`` carries copies of ``desks/``, ``briefs/``, ``sweepers/`` and
``board_templates/`` files (package data must live inside the package); ``cli/`` holds the
desks ``assay init --cli`` writes, which this repository does not run itself. When one of those
changes, ``tests/github/test_init.py`` fails and names it; run ``python -m
tests.github.sync_templates`` to copy the repository's versions over the packaged ones.
"""

from __future__ import annotations

import shutil

from assay.github.init import TEMPLATES
from tests.conftest import REPO_ROOT


def main() -> None:
    for packaged in sorted(TEMPLATES.rglob("*")):
        relative = packaged.relative_to(TEMPLATES)
        if not packaged.is_file() or relative.parts[0] in ("workflows", "cli"):
            continue
        original = REPO_ROOT / relative
        if original.read_bytes() != packaged.read_bytes():
            shutil.copyfile(original, packaged)
            print(f"refreshed {relative}")
    for workflow in sorted((TEMPLATES / "workflows").glob("*.yml")):
        shutil.copyfile(workflow, REPO_ROOT / ".github" / "workflows" / workflow.name)


if __name__ == "__main__":
    main()
