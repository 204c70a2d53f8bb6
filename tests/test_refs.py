"""The ref layout lives in assay/refs.py alone: no other module spells a ref literal."""

from __future__ import annotations

import ast
import re

import pytest

from assay import refs
from assay.errors import BadInput
from tests.conftest import REPO_ROOT

REF_LITERAL = re.compile(r"refs/(assay|heads)/|refs/heads/main")


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            found.add(id(first.value))
    return found


def test_no_module_but_refs_spells_a_ref_prefix() -> None:
    offenders = []
    for path in sorted((REPO_ROOT / "assay").rglob("*.py")):
        if path == REPO_ROOT / "assay" / "refs.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            text = node.value if isinstance(node, ast.Constant) else None
            if isinstance(text, str) and id(node) not in docs and REF_LITERAL.search(text):
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}")
    assert offenders == [], "ref literals outside assay/refs.py: " + ", ".join(offenders)


def test_builders_check_the_brief_id() -> None:
    assert refs.claim_ref("b1") == "refs/assay/claims/b1"
    assert refs.branch_ref("b1") == "refs/heads/assay/b1" == refs.BRANCHES + "b1"
    assert refs.brief_of(refs.events_ref("b1"), refs.EVENTS) == "b1"
    assert refs.brief_log("status", "b1") == refs.status_ref("b1")
    with pytest.raises(BadInput):
        refs.claim_ref("../main")
