"""The ref layout: every ref Assay reads or writes on a forge, named in one place.

One ref per entity (``refs/assay/<log>/<brief>``), each brief's work on its own branch
(``refs/heads/assay/<brief>``), the briefs on main. Every module builds and parses ref names
through this one; a test fails when a ref literal is spelled anywhere else. Builders check
the brief id (``assay.ids.check_id``) so a ref can never be aimed outside its namespace.
"""

from __future__ import annotations

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


def branch_ref(brief: str) -> str:
    """``refs/heads/assay/<brief>``."""
    return BRANCHES + check_id(brief)


def claim_ref(brief: str) -> str:
    return CLAIMS + check_id(brief)


def events_ref(brief: str) -> str:
    return EVENTS + check_id(brief)


def evidence_ref(brief: str) -> str:
    return EVIDENCE + check_id(brief)


def review_ref(brief: str) -> str:
    return REVIEWS + check_id(brief)


def status_ref(brief: str) -> str:
    return STATUS + check_id(brief)


def github_ref(brief: str) -> str:
    return GITHUB + check_id(brief)


def brief_of(ref: str, prefix: str) -> str:
    """The brief a per-brief ref names (``brief_of("refs/assay/claims/b1", CLAIMS)``)."""
    return ref[len(prefix) :] if ref.startswith(prefix) else ""
