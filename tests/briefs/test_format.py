"""The brief format: what parses, and what is refused with file, line and field named."""

from __future__ import annotations

import pytest

from assay.briefs import Brief, BudgetSpec, parse_brief, render_brief
from assay.errors import BadInput

GOOD = """\
---
id: add-median
title: Add a median() function
desk: coder
labels: [python, stats]
priority: 3
depends_on: [setup]
verify:
  - id: unit
    run: pytest -q tests/test_stats.py
    timeout: 120
  - id: lint
    run: ruff check stats.py
env:
  python: "3.11"
  lock: requirements.lock
  tools: [pytest, ruff]
budget: {steps: 40, model_calls: 20, tokens: 100000, usd: 0.5, wall_s: 600}
objective: {judge: pytest -q, max_runs: 4, budget: {usd: 2}}
---

# Median

Add it.
"""


def bad(text: str, source: str = "briefs/x.md") -> str:
    with pytest.raises(BadInput) as caught:
        parse_brief(text, source=source)
    assert caught.value.code == 65
    return caught.value.message


def test_a_full_brief_parses_every_field() -> None:
    brief = parse_brief(GOOD, source="briefs/add-median.md")
    assert brief.id == "add-median"
    assert brief.desk == "coder"
    assert brief.labels == ["python", "stats"]
    assert brief.priority == 3
    assert brief.depends_on == ["setup"]
    assert [(r.id, r.run, r.timeout) for r in brief.verify] == [
        ("unit", "pytest -q tests/test_stats.py", 120.0),
        ("lint", "ruff check stats.py", None),
    ]
    assert brief.verify[0].argv == ["pytest", "-q", "tests/test_stats.py"]
    assert brief.env.python == "3.11"
    assert brief.env.lock == ["requirements.lock"]  # one file becomes a list
    assert brief.env.tools == ["pytest", "ruff"]
    assert brief.budget == BudgetSpec(steps=40, model_calls=20, tokens=100000, usd=0.5, wall_s=600)
    assert brief.objective is not None
    assert brief.objective.max_runs == 4
    assert brief.objective.budget == BudgetSpec(usd=2.0)
    assert brief.body == "# Median\n\nAdd it.\n"
    assert brief.source == "briefs/add-median.md"


def test_defaults_of_a_minimal_brief() -> None:
    brief = parse_brief("---\nid: x\ntitle: T\n---\n", source="briefs/x.md")
    assert brief.priority == 0
    assert brief.labels == [] and brief.depends_on == [] and brief.verify == []
    assert brief.desk is None and brief.objective is None
    assert brief.budget == BudgetSpec()
    assert brief.body == ""


def test_crlf_and_bom_are_accepted() -> None:
    text = "\ufeff---\r\nid: x\r\ntitle: T\r\n---\r\nbody\r\n"
    assert parse_brief(text, source="briefs/x.md").body == "body\n"


def test_missing_field_names_file_line_and_field() -> None:
    text = "---\nid: x\ntitle: T\nverify:\n  - id: unit\n    timeout: 3\n---\n"
    assert bad(text) == "briefs/x.md line 5: verify[0].run: field required"


def test_unknown_field_is_named_with_its_line() -> None:
    text = "---\nid: x\ntitle: T\n\ncolour: red\n---\n"
    assert bad(text) == "briefs/x.md line 5: colour: unknown field"


def test_unknown_nested_field() -> None:
    text = "---\nid: x\ntitle: T\nbudget:\n  steps: 3\n  dollars: 4\n---\n"
    assert bad(text) == "briefs/x.md line 6: budget.dollars: unknown field"


def test_wrong_type_names_the_field() -> None:
    message = bad("---\nid: x\ntitle: T\npriority: high\n---\n")
    assert message.startswith("briefs/x.md line 4: priority: ")
    assert "integer" in message


def test_booleans_are_not_priorities() -> None:
    assert "priority" in bad("---\nid: x\ntitle: T\npriority: true\n---\n")


def test_float_python_version_is_refused_with_a_hint() -> None:
    message = bad("---\nid: x\ntitle: T\nenv: {python: 3.10}\n---\n")
    assert "line 4: env.python" in message
    assert 'python: "3.1"' in message


def test_id_must_match_the_file_name() -> None:
    message = bad("---\nid: other\ntitle: T\n---\n", source="briefs/x.md")
    assert message == "briefs/x.md line 2: id: 'other' does not match the file name 'x.md'"


def test_any_source_without_md_suffix_skips_the_stem_check() -> None:
    assert parse_brief("---\nid: other\ntitle: T\n---\n", source="issue #12").id == "other"


@pytest.mark.parametrize("value", ["a/b", "..", "a b", ".x", "x.lock"])
def test_unsafe_ids_are_refused(value: str) -> None:
    message = bad(f"---\nid: {value!r}\ntitle: T\n---\n", source="issue")
    assert "line 2: id:" in message


def test_unsafe_dependency_and_self_dependency() -> None:
    assert "depends_on" in bad("---\nid: x\ntitle: T\ndepends_on: [a/b]\n---\n")
    assert "line 4: depends_on: a brief cannot depend on itself" in bad(
        "---\nid: x\ntitle: T\ndepends_on: [x]\n---\n"
    )


def test_duplicate_verify_row_ids() -> None:
    text = "---\nid: x\ntitle: T\nverify:\n- {id: a, run: 'true'}\n- {id: a, run: 'false'}\n---\n"
    assert bad(text) == "briefs/x.md line 6: verify[1].id: row id 'a' is used twice"


def test_unbalanced_quotes_in_a_command() -> None:
    message = bad("---\nid: x\ntitle: T\nverify:\n- {id: a, run: 'echo \"oops'}\n---\n")
    assert "line 5: verify[0].run: run is not a valid command line" in message


def test_lock_paths_must_stay_in_the_repository() -> None:
    assert "env.lock" in bad("---\nid: x\ntitle: T\nenv: {lock: ../secrets}\n---\n")
    assert "env.lock" in bad("---\nid: x\ntitle: T\nenv: {lock: [/etc/passwd]}\n---\n")


def test_negative_budget_and_zero_max_runs() -> None:
    assert "budget.usd" in bad("---\nid: x\ntitle: T\nbudget: {usd: -1}\n---\n")
    text = "---\nid: x\ntitle: T\nobjective: {judge: 'true', max_runs: 0}\n---\n"
    assert "objective.max_runs" in bad(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("no front matter\n", "line 1: a brief starts with a '---' line"),
        ("---\nid: x\ntitle: T\n", "the front matter is not closed"),
        ("---\n---\nbody\n", "line 2: the front matter is empty"),
        ("---\n- a\n- b\n---\n", "line 2: the front matter must be a mapping"),
        ("---\nid: x\ntitle: [unclosed\n---\n", "invalid YAML"),
        ("---\nid: x\nid: y\ntitle: T\n---\n", "line 3: id: duplicate key"),
        ("---\nid: &a x\ntitle: *a\n---\n", "anchors and aliases are not allowed"),
        ("---\nid: x\ntitle: T\nbody: hi\n---\n", "line 4: body: unknown field"),
        ("---\nid: x\ntitle: !!python/object:os.system T\n---\n", "invalid YAML"),
    ],
)
def test_malformed_documents(text: str, expected: str) -> None:
    message = bad(text)
    assert message.startswith("briefs/x.md")
    assert expected in message


def test_several_problems_are_all_in_the_details() -> None:
    with pytest.raises(BadInput) as caught:
        parse_brief("---\nid: x\npriority: x\ncolour: 1\n---\n", source="briefs/x.md")
    fields = {p["field"] for p in caught.value.details["problems"]}
    assert fields == {"title", "priority", "colour"}
    assert "(and 2 more)" in caught.value.message


def test_render_round_trips() -> None:
    brief = parse_brief(GOOD, source="briefs/add-median.md")
    again = parse_brief(render_brief(brief), source="briefs/add-median.md")
    assert again.to_json() == brief.to_json()


def test_briefs_are_frozen() -> None:
    brief = parse_brief(GOOD, source="briefs/add-median.md")
    assert isinstance(brief, Brief)
    with pytest.raises(ValueError, match="frozen"):
        brief.priority = 9  # type: ignore[misc]


def test_budget_tightest_takes_the_smaller_limit_per_field() -> None:
    desk = BudgetSpec(steps=10, usd=1.0)
    brief = BudgetSpec(steps=20, model_calls=5)
    assert desk.tightest(brief) == BudgetSpec(steps=10, model_calls=5, usd=1.0)
    assert desk.tightest(None) == desk
    assert desk.to_json() == {"steps": 10, "usd": 1.0}


def test_integer_ids_and_labels_are_text() -> None:
    brief = parse_brief(
        "---\nid: 42\ntitle: 2024\nlabels: [7, bug]\ndepends_on: [41]\n---\n", source="briefs/42.md"
    )
    assert (brief.id, brief.title, brief.labels, brief.depends_on) == (
        "42",
        "2024",
        ["7", "bug"],
        ["41"],
    )
    assert "title" in bad("---\nid: x\ntitle: 1.5\n---\n")
