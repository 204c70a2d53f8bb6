"""Brief YAML is parsed once, by libyaml when PyYAML has it, with the same checked errors."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from assay.briefs import parse_brief, yamldoc
from assay.errors import BadInput

BRIEF = """---
id: calc
title: Add calc.add
verify:
  - id: unit
    run: python3 check.py
---
Body.
"""


def test_the_c_loader_is_used_when_libyaml_is_there() -> None:
    # This environment's PyYAML is built with libyaml; the fast parser must be the one used.
    assert yaml.__with_libyaml__
    assert yamldoc._Loader is yaml.CSafeLoader


def test_a_brief_is_composed_once_and_never_reparsed(monkeypatch: pytest.MonkeyPatch) -> None:
    composed: list[int] = []
    original = yaml.CSafeLoader.get_single_node

    def counting(self: Any) -> Any:
        composed.append(1)
        return original(self)

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a second, pure-Python pass over the document")

    monkeypatch.setattr(yaml.CSafeLoader, "get_single_node", counting)
    for name in ("parse", "compose", "load", "safe_load", "scan"):
        monkeypatch.setattr(yaml, name, forbidden)
    brief = parse_brief(BRIEF, source="briefs/calc.md")
    assert brief.verify[0].run == "python3 check.py"
    assert composed == [1]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("---\nid: x\ntitle: T\nid: y\n---\n", "briefs/x.md line 4: id: duplicate key"),
        (
            "---\nid: &a x\ntitle: T\nlabels: [*a]\n---\n",
            "briefs/x.md line 4: YAML anchors and aliases are not allowed",
        ),
        ("---\nid: x\ntitle: [unclosed\n---\n", "briefs/x.md line 4: invalid YAML"),
    ],
)
def test_errors_keep_file_lines_with_the_c_loader(text: str, message: str) -> None:
    assert yamldoc._Loader is yaml.CSafeLoader
    with pytest.raises(BadInput) as raised:
        parse_brief(text, source="briefs/x.md")
    assert message in raised.value.message
