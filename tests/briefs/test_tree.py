"""Loading a tree of briefs: duplicates, unknown dependencies, cycles, directories."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.briefs import by_priority, load_brief_dir, load_briefs, unmet_dependencies
from assay.errors import BadInput
from tests.conftest import REPO_ROOT


def brief(brief_id: str, *, deps: tuple[str, ...] = (), priority: int = 0) -> bytes:
    lines = ["---", f"id: {brief_id}", f"title: Brief {brief_id}", f"priority: {priority}"]
    if deps:
        lines.append("depends_on:")
        lines.extend(f"  - {dep}" for dep in deps)
    return ("\n".join([*lines, "---", "body", ""])).encode()


def test_loads_every_brief_and_skips_readmes_and_other_files() -> None:
    files = {
        "briefs/a.md": brief("a"),
        "briefs/b.md": brief("b", deps=("a",)),
        "briefs/README.md": b"# not a brief",
        "briefs/_draft.md": b"not even front matter",
        "briefs/notes.txt": b"ignored",
    }
    assert sorted(load_briefs(files)) == ["a", "b"]


def test_duplicate_ids_across_folders() -> None:
    files = {"briefs/a.md": brief("a"), "briefs/old/a.md": brief("a")}
    with pytest.raises(BadInput) as caught:
        load_briefs(files)
    assert caught.value.message == ("briefs/old/a.md line 2: id: 'a' is also the id of briefs/a.md")


def test_unknown_dependency_names_its_line() -> None:
    files = {"briefs/a.md": brief("a", deps=("b", "ghost"))}
    with pytest.raises(BadInput) as caught:
        load_briefs(files, known_ids={"b"})
    assert caught.value.message == "briefs/a.md line 7: depends_on[1]: unknown brief 'ghost'"


def test_a_dependency_cycle_is_named() -> None:
    files = {
        "briefs/a.md": brief("a", deps=("b",)),
        "briefs/b.md": brief("b", deps=("c",)),
        "briefs/c.md": brief("c", deps=("a",)),
        "briefs/d.md": brief("d", deps=("a",)),
    }
    with pytest.raises(BadInput) as caught:
        load_briefs(files)
    assert "dependency cycle a -> b -> c -> a" in caught.value.message
    assert caught.value.details["cycle"] == ["a", "b", "c", "a"]


def test_a_diamond_is_not_a_cycle() -> None:
    files = {
        "briefs/a.md": brief("a", deps=("b", "c")),
        "briefs/b.md": brief("b", deps=("d",)),
        "briefs/c.md": brief("c", deps=("d",)),
        "briefs/d.md": brief("d"),
    }
    assert len(load_briefs(files)) == 4


def test_invalid_utf8_is_bad_input_naming_the_file() -> None:
    with pytest.raises(BadInput, match=r"briefs/a\.md: not UTF-8"):
        load_briefs({"briefs/a.md": b"---\nid: a\ntitle: \xff\n---\n"})


def test_priority_order_and_unmet_dependencies() -> None:
    briefs = load_briefs(
        {
            "briefs/low.md": brief("low"),
            "briefs/high.md": brief("high", priority=5),
            "briefs/mid.md": brief("mid", priority=1, deps=("low", "high")),
            "briefs/also-high.md": brief("also-high", priority=5),
        }
    )
    assert [b.id for b in by_priority(briefs.values())] == ["also-high", "high", "mid", "low"]
    assert unmet_dependencies(briefs["mid"], {"high"}) == ["low"]
    assert unmet_dependencies(briefs["mid"], {"high", "low"}) == []


def test_load_a_directory(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_bytes(brief("a"))
    (tmp_path / "README.md").write_text("# readme")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.md").write_bytes(brief("b"))  # not read: not directly inside
    briefs = load_brief_dir(tmp_path)
    assert list(briefs) == ["a"]
    assert briefs["a"].source == str(tmp_path / "a.md")


def test_missing_directory_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="no such briefs directory"):
        load_brief_dir(tmp_path / "nope")


def test_the_shipped_example_briefs_parse() -> None:
    briefs = load_brief_dir(REPO_ROOT / "briefs")
    assert "example-add-function" in briefs
    example = briefs["example-add-function"]
    assert [row.id for row in example.verify] == ["unit"]
    assert briefs["example-objective"].objective is not None
