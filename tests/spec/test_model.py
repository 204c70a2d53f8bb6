"""The claim protocol's Promela model, checked by spin (docs/spec/).

Safety is checked exhaustively for 3 desks, 2 briefs, bounded crashes and pauses; liveness
(a crashed holder's brief is held again) under weak fairness; every path the properties
speak about is shown reachable; and each deliberately broken variant is rejected with a
counterexample whose narrative reads as the story of the bug.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.spec.spin import Verifier

# The exhaustive run stores states up to a renaming of desks (SYMMETRY), which is what
# makes 3 desks x 2 briefs fit in seconds; its size is recorded in docs/spec/README.md.
SAFETY_MIN_STATES = 500_000


def test_safety_holds_exhaustively_for_three_desks_and_two_briefs(tmp_path: Path) -> None:
    pan = Verifier(
        tmp_path,
        "claims.pml",
        defines=("-DND=3", "-DNB=2", "-DSYMMETRY"),
        cflags=("-DSAFETY", "-DNOCLAIM"),
        optimize="-O2",
    )
    run = pan.check("-m100000")
    assert run.errors == 0, run.output
    assert run.complete, run.output
    assert "assertion violations\t+" in run.output
    assert "invalid end states\t+" in run.output
    # Not vacuous in size: the bounded model still has over half a million distinct states.
    assert run.states >= SAFETY_MIN_STATES, run.output


def test_liveness_a_crashed_holders_brief_is_held_again(tmp_path: Path) -> None:
    pan = Verifier(
        tmp_path,
        "claims.pml",
        defines=("-DND=3", "-DNB=1"),
        cflags=("-DNFAIR=3",),
        optimize="-O2",
    )
    run = pan.check("-a", "-f", "-m200000", "-N", "recovered")
    assert run.errors == 0, run.output
    assert run.complete, run.output
    assert "acceptance   cycles \t+ (fairness enabled)" in run.output


COVERED_PATHS = {
    "steal": "a desk takes over an expired claim",
    "stuck": "a desk takes over a claim the sweeper marked stuck",
    "wake": "a waiting claim is acquired again",
    "done": "a brief is finished done",
    "recovered": "a crashed holder's brief is held again",
    "window_effect": "a zombie's effect lands inside the re-check window",
    "window_entry": "a zombie's entry lands before the new holder's takeover",
    "renew_refused": "a zombie's renewal is refused",
    "push_refused": "a zombie's journal push is refused",
    "journal_ahead": "a late holder finds a newer fence on the branch",
    "not_owner": "a zombie's ownership re-check fails closed",
    "cas_refused": "a zombie's release is refused",
}


@pytest.fixture(scope="module")
def coverage(tmp_path_factory: pytest.TempPathFactory) -> Verifier:
    return Verifier(
        tmp_path_factory.mktemp("cover"),
        "claims.pml",
        defines=("-DCOVER",),
        cflags=("-DSAFETY",),
    )


@pytest.mark.parametrize("path", sorted(COVERED_PATHS))
def test_every_guarded_path_is_reachable(coverage: Verifier, path: str) -> None:
    # "[] !seen_<path>" fails exactly when the model can reach that path.
    run = coverage.check("-N", f"reach_{path}")
    assert run.errors == 1, f"{COVERED_PATHS[path]}: unreachable in the model\n{run.output}"


# variant -> (the violated property's message, narrative lines the trace must contain)
BROKEN = {
    "broken_renew.pml": (
        "VIOLATED: the claim ref's fence went backwards",
        ["PAUSES holding brief", "takes over brief", "(no CAS)"],
    ),
    "broken_effect.pml": (
        "VIOLATED: an effect by a fenced holder outside the window idempotency keys cover",
        ["PAUSES holding brief", "takes over brief", "makes an effect on brief"],
    ),
    "broken_takeover.pml": (
        "VIOLATED: a journal entry from a fenced holder landed after a newer holder's entries",
        ["takes over brief", "pushes its takeover entry"],
    ),
    "broken_done.pml": (
        "VIOLATED: a done brief was claimed again",
        ["finishes brief 0: done", "acquires brief 0 (DONE)"],
    ),
    "broken_skew.pml": (
        "VIOLATED: two desks hold a brief with unexpired leases",
        ["holds brief 0 at fence 1", "takes over brief 0", "holds brief 0 at fence 2"],
    ),
}


@pytest.mark.parametrize("model", sorted(BROKEN))
def test_broken_variant_is_rejected_with_a_readable_trace(tmp_path: Path, model: str) -> None:
    message, story = BROKEN[model]
    # Breadth-first search: the counterexample is a shortest one.
    pan = Verifier(tmp_path, model, cflags=("-DSAFETY", "-DNOCLAIM", "-DBFS"))
    run = pan.check()
    assert run.errors >= 1, run.output
    assert "assertion violated" in run.output
    trace = pan.replay()
    assert message in trace, trace
    assert "spin: text of failed assertion" in trace, trace
    for line in story:
        assert line in trace, f"{line!r} missing from the counterexample:\n{trace}"
    # The narrative comes before the verdict: the story leads up to the violation.
    assert trace.index(story[0]) < trace.index(message), trace


def test_broken_recovery_fails_liveness_with_a_cycle(tmp_path: Path) -> None:
    pan = Verifier(
        tmp_path,
        "broken_recovery.pml",
        defines=("-DND=3", "-DNB=1"),
        cflags=("-DNFAIR=3",),
    )
    run = pan.check("-a", "-f", "-m200000", "-N", "recovered")
    assert run.errors >= 1, run.output
    assert "acceptance cycle" in run.output
    trace = pan.replay()
    assert "CRASHES" in trace, trace
    assert "START OF CYCLE" in trace, trace
    assert trace.index("CRASHES") < trace.index("START OF CYCLE"), trace
