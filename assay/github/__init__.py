"""GitHub as a forge: the REST layer, the adapter (git layer + API layer), and ``assay init``.

Importing this package registers ``open_github_forge`` as the opener of ``github:OWNER/REPO``
forges (:mod:`assay.schemes`); ``assay.forge`` never imports it.
"""

from __future__ import annotations

from assay.github.forge import GitHubForge, open_github_forge
from assay.schemes import register_forge_scheme

register_forge_scheme("github:", open_github_forge)

__all__ = ["GitHubForge", "open_github_forge"]
