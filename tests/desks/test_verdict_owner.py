"""The gate owns the verdict: a desk's review carries its own claims, never a judgement.

The desk writes its summary and the rows it claims; the evidence block of the review is
the gate's: "not verified yet" until ``assay verify`` has judged that head, then the gate's
table, which a later desk write at the same head keeps and a new head replaces with the
note again. A desk whose claims are all "pass" cannot make its review say "mergeable".
"""

from __future__ import annotations

import json

from tests.desks.world import World, brief_text, finish, write

ROW = {"id": "unit", "run": "python3 -c 'import sys; sys.exit(1)'"}  # fails, whatever is said


def test_the_review_says_what_the_gate_found_and_never_what_the_desk_claims(
    world: World,
) -> None:
    world.add_briefs(brief_text("b1", verify=[ROW]))
    world.add_desk("coder", [write("x.txt", "x\n"), finish("all good", unit="pass")])
    done = world.desk("coder", "--once", "--json")
    assert done.returncode == 0, done.stderr
    review = world.review("b1")
    assert review is not None
    head = review.head_sha
    assert "| unit | pass |" in review.body  # the desk's claim, as its own section says
    assert f"Evidence at `{head[:12]}`: not verified yet" in review.body
    assert "mergeable" not in review.body and "| pass |" not in review.body.split("begin")[-1]
    # The gate judges the head and writes its table into the review.
    verified = world.assay("verify", "b1", "--forge", world.url, "--json")
    assert verified.returncode == 1, verified.stdout + verified.stderr
    assert json.loads(verified.stdout)["passed"] is False
    judged = world.review("b1")
    assert judged is not None
    assert f"Evidence at `{head[:12]}`: not mergeable." in judged.body
    assert "not verified yet" not in judged.body
