"""GitHub as a forge: the REST layer, the adapter (git layer + API layer), and ``assay init``.

``open_github_forge`` is what ``assay.forge.open_forge("github:OWNER/REPO")`` calls.
"""

from __future__ import annotations

from assay.github.forge import GitHubForge, open_github_forge

__all__ = ["GitHubForge", "open_github_forge"]
