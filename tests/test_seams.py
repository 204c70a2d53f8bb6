"""The packages' seams that a refactor must not undo, read from the import statements.

The read model (``assay.forgestate``) is what the board, the sweepers and the desks share;
neither the board nor the sweepers reach into the other for it, and the read model itself
depends on neither.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "assay"


def _imported_packages(package: str) -> set[str]:
    """The ``assay.<x>`` packages any module of ``assay.<package>`` imports."""
    found: set[str] = set()
    for path in (PACKAGE / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            found |= {n.split(".")[1] for n in names if n.startswith("assay.") and "." in n}
    return found - {package}


@pytest.mark.parametrize(
    ("package", "never"),
    [("board", "sweep"), ("sweep", "board"), ("forgestate", "board"), ("forgestate", "sweep")],
)
def test_a_package_does_not_import_across_its_seam(package: str, never: str) -> None:
    assert never not in _imported_packages(package)


def test_the_scan_sees_imports() -> None:
    # The check above could pass by reading nothing: the board does read the read model.
    assert "forgestate" in _imported_packages("board")
    assert "forgestate" in _imported_packages("sweep")
