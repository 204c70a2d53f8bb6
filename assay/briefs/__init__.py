"""Briefs: the file format (``briefs/<id>.md``), validation, and loading a tree of them.

``parse_brief`` reads one file, ``load_briefs`` a mapping of paths to bytes (a forge's
main), ``load_brief_dir`` a directory. Errors are ``BadInput`` naming file, line and field.
"""

from __future__ import annotations

from assay.briefs.format import (
    Brief,
    BudgetSpec,
    EnvSpec,
    FrontMatter,
    Objective,
    VerifyRow,
    parse_brief,
    render_brief,
)
from assay.briefs.tree import (
    by_priority,
    check_dependencies,
    is_brief_path,
    load_brief_dir,
    load_briefs,
    unmet_dependencies,
)

__all__ = [
    "Brief",
    "BudgetSpec",
    "EnvSpec",
    "FrontMatter",
    "Objective",
    "VerifyRow",
    "by_priority",
    "check_dependencies",
    "is_brief_path",
    "load_brief_dir",
    "load_briefs",
    "parse_brief",
    "render_brief",
    "unmet_dependencies",
]
