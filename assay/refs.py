"""The ref layout: every ref Assay reads or writes on a forge, named in one place.

One ref per entity (``refs/assay/<log>/<brief>``), each brief's work on its own branch
(``refs/heads/assay/<brief>``), the briefs on main. Every module builds and parses ref names
through this one; a test fails when a ref literal is spelled anywhere else. Builders check
the brief id (``assay.ids.check_id``) so a ref can never be aimed outside its namespace.
"""

from __future__ import annotations

from collections.abc import Callable

from assay.ids import check_id

HEADS = "refs/heads/"
MAIN = "refs/heads/main"
BRANCH_PREFIX = "assay/"  # a brief's branch, as a branch name: assay/<brief>
BRANCHES = HEADS + BRANCH_PREFIX  # refs/heads/assay/<brief>
ASSAY = "refs/assay/"
CLAIMS = ASSAY + "claims/"
EVENTS = ASSAY + "events/"
EVIDENCE = ASSAY + "evidence/"
REVIEWS = ASSAY + "reviews/"
STATUS = ASSAY + "status/"
SWEEPS = ASSAY + "sweeps/"
SWEEP_LOG = SWEEPS + "log"
ORPHAN_LOG = SWEEPS + "orphans"
GITHUB = ASSAY + "github/"
CONFIG = ASSAY + "config"  # the forge's settings record (the gate's public key): admin only
HOLDOUT = ASSAY + "holdout/"  # refs/assay/holdout/<brief>: rows sealed to the gate
# The commit a merge is about to move main to, pushed first where the forge judges a push
# to main by that commit's checks (GitHub's required status checks): one ref, reused.
MERGING = ASSAY + "merging"
RUNS = ASSAY + "runs/"  # refs/assay/runs/<brief>/<attempt>: a merged run's checkpoints, kept
# refs/assay/journal/<brief>: the run's checkpoint chain (work tree + .assay/journal/<brief>/);
# the branch assay/<brief> beside it holds the code alone.
JOURNALS = ASSAY + "journal/"
# In a desk's work directory only (never on a forge): the code commit the local checkpoint
# derives, the branch's next tip.
WORKDIR_CODE = "refs/assay-work/code/"
# Where ``assay github events`` has read GitHub's comments up to (one repository-wide record).
GITHUB_EVENTS_CURSOR = ASSAY + "github-events/cursor"
# refs/assay/github-issues/<number>: the issue text a writer accepted, signed by the gate key.
GITHUB_ISSUES = ASSAY + "github-issues/"
# refs/assay/github-ids/<brief>: the issue a brief id is bound to (the first to name it),
# signed by the gate key; never moved once written.
GITHUB_IDS = ASSAY + "github-ids/"

# Everything the board and the sweepers read, in one fetch.
FETCH_ALL = (HEADS, ASSAY)
# What the waker watches: a new brief on main, or an event for a waiting run.
WATCHED = (MAIN, EVENTS)


def brief_log(log: str, brief: str) -> str:
    """``refs/assay/<log>/<brief>`` for a per-brief log (claims, events, evidence, …)."""
    return f"{ASSAY}{log}/{check_id(brief)}"


def branch_name(brief: str) -> str:
    """``assay/<brief>``: the brief's branch, as ``git checkout`` names it."""
    return BRANCH_PREFIX + check_id(brief)


def _per_brief(prefix: str, doc: str) -> Callable[[str], str]:
    """The builder of one per-brief ref: ``prefix`` + the checked brief id."""

    def build(brief: str) -> str:
        return prefix + check_id(brief)

    build.__doc__ = doc
    return build


branch_ref = _per_brief(BRANCHES, "``refs/heads/assay/<brief>``.")
claim_ref = _per_brief(CLAIMS, "``refs/assay/claims/<brief>``.")
events_ref = _per_brief(EVENTS, "``refs/assay/events/<brief>``.")
evidence_ref = _per_brief(EVIDENCE, "``refs/assay/evidence/<brief>``.")
review_ref = _per_brief(REVIEWS, "``refs/assay/reviews/<brief>``.")
status_ref = _per_brief(STATUS, "``refs/assay/status/<brief>``.")
github_ref = _per_brief(GITHUB, "``refs/assay/github/<brief>``.")
github_id_ref = _per_brief(GITHUB_IDS, "``refs/assay/github-ids/<brief>``.")
holdout_ref = _per_brief(HOLDOUT, "``refs/assay/holdout/<brief>``.")
workdir_code_ref = _per_brief(WORKDIR_CODE, "``refs/assay-work/code/<brief>`` (work directory).")
journal_ref = _per_brief(
    JOURNALS, "``refs/assay/journal/<brief>``: the brief's checkpoints, journal included."
)


def run_ref(brief: str, attempt: int) -> str:
    """``refs/assay/runs/<brief>/<attempt>``: the checkpoint chain of a run that merged (its
    journal included), kept while main holds only the run's squashed code."""
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 0:
        raise ValueError(f"a run's attempt must be a whole number, not {attempt!r}")
    return f"{RUNS}{check_id(brief)}/{attempt}"


def runs_of(brief: str) -> str:
    """``refs/assay/runs/<brief>/``: the prefix of every run ref of ``brief``."""
    return f"{RUNS}{check_id(brief)}/"


def run_of(ref: str) -> tuple[str, int] | None:
    """The ``(brief, attempt)`` a run ref names; None for any other ref."""
    if not ref.startswith(RUNS):
        return None
    brief, _, attempt = ref[len(RUNS) :].rpartition("/")
    if not brief or "/" in brief or not attempt.isdigit():
        return None
    return brief, int(attempt)


def brief_of(ref: str, prefix: str) -> str:
    """The brief a per-brief ref names (``brief_of("refs/assay/claims/b1", CLAIMS)``)."""
    return ref[len(prefix) :] if ref.startswith(prefix) else ""
