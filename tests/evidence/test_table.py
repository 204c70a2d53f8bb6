"""The claimed-versus-verified table: Markdown rows, and replacing the block in a body."""

from __future__ import annotations

import io

from rich.console import Console

from assay.evidence.claimed import Claimed, ClaimedRow
from assay.evidence.rule import decide
from assay.evidence.spec import EnvDecl, RowSpec
from assay.evidence.table import BEGIN, END, render_markdown, render_rich, with_table
from tests.evidence.gatekit import record

HEAD = "c" * 40


def _decision() -> object:
    failing = record(
        command="pytest -q | tee x",
        exit=1,
        seconds=0.2,
        head_sha=HEAD,
        env_fingerprint={"python": "3.11.2"},
    )
    return decide(
        brief="calc",
        rows=[RowSpec("unit", "pytest -q | tee x"), RowSpec("lint", "ruff check")],
        records=[failing],
        head_sha=HEAD,
        env=EnvDecl(),
        claimed=Claimed(rows={"unit": ClaimedRow("unit", "pass")}),
    )


def test_markdown_table_has_a_row_per_acceptance_row() -> None:
    text = render_markdown(_decision())  # type: ignore[arg-type]
    lines = text.splitlines()
    assert "not mergeable" in lines[0]
    assert (
        "| unit | `pytest -q \\| tee x` | pass | fail (exit 1) | `cccccccccccc` | failing |"
        in lines
    )
    assert "| lint | `ruff check` | — | — | — | missing |" in lines


def test_the_block_in_a_body_is_replaced_not_duplicated() -> None:
    body = with_table("Adds calc.\n", "table one\n")
    assert body == f"Adds calc.\n\n{BEGIN}\ntable one\n{END}\n"
    again = with_table(body + "\nmore text\n", "table two\n")
    assert again.count(BEGIN) == 1
    assert "table two" in again and "table one" not in again
    assert again.endswith("more text\n")


def test_rich_table_prints_brief_text_literally() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, width=200, no_color=True)
    decision = _decision()
    console.print(render_rich(decision))  # type: ignore[arg-type]
    assert "pytest -q | tee x" in buffer.getvalue()
    assert "failing" in buffer.getvalue()
