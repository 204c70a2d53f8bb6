"""One read of the forge for the desk layer: briefs on main, claims, merged and cancelled.

``read_view`` costs a handful of round trips whatever the number of briefs (one fetch of
main and the branches, one of the claims, one of the events); journals are read lazily,
only for waiting briefs whose wake condition must be judged. A malformed brief file does
not stop the other briefs: it is kept in ``bad`` and reported, and naming it with
``--brief`` is ``BadInput`` (exit 65) with the file and field.
"""

from __future__ import annotations

import io
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from assay.branch import journal_path
from assay.briefs import Brief, check_dependencies, is_brief_path, parse_brief
from assay.claims import ClaimStore
from assay.desks.events import EventLog
from assay.desks.objectives import objective_events
from assay.errors import AssayError, BadInput
from assay.forge import Forge
from assay.journal import Journal, read_journal
from assay.plumbing import run_git
from assay.runtime.history import History

MAIN = "refs/heads/main"
BRANCHES = "refs/heads/assay/"


@dataclass
class ForgeView:
    """What the forge says right now, as the desk loop, wake and resync need it."""

    forge: Forge
    main: str | None
    briefs: dict[str, Brief]
    bad: dict[str, AssayError]  # path -> why it could not be read
    claims: dict[str, Any]  # brief -> ClaimRecord
    branches: dict[str, str]  # brief -> branch tip sha
    merged: set[str]
    cancelled: set[str]
    budget_left: Callable[[Brief, Any], bool] = lambda brief, summary: False
    _journals: dict[str, Journal | None] = field(default_factory=dict)
    _events: dict[str, list[Any]] = field(default_factory=dict)

    def require(self, brief_id: str) -> Brief:
        """The brief named on the command line, or the error that explains why not."""
        for path, error in self.bad.items():
            if PurePosixPath(path).stem == brief_id:
                raise error
        if brief_id not in self.briefs:
            raise BadInput(f"--brief: no brief {brief_id!r} on the forge's main (briefs/)")
        return self.briefs[brief_id]

    def events(self, brief_id: str) -> list[Any]:
        if brief_id not in self._events:
            self._events[brief_id] = EventLog(self.forge, brief_id).read()
        return self._events[brief_id]

    def journal(self, brief_id: str) -> Journal | None:
        """The journal on the brief's branch tip (read once per view), or None."""
        if brief_id not in self._journals:
            tip = self.branches.get(brief_id)
            self._journals[brief_id] = (
                None if tip is None else read_tree_journal(self.forge, tip, brief_id)
            )
        return self._journals[brief_id]

    def arrived(self, brief_id: str) -> bool:
        """Whether what a waiting brief waits for has arrived (event, timer or budget)."""
        claim = self.claims.get(brief_id)
        waiting_for = str(getattr(claim, "waiting_for", "") or "")
        journal = self.journal(brief_id)
        if waiting_for == "budget":
            from assay.journal import summarize

            brief = self.briefs.get(brief_id)
            return bool(brief and journal and self.budget_left(brief, summarize(journal)))
        consumed = consumed_events(journal)
        delivered = list(self.events(brief_id))
        brief = self.briefs.get(brief_id)
        if brief is not None:
            delivered += objective_events(brief, journal)
        fresh = [e for e in delivered if e.id not in consumed]
        until = wait_until(journal)
        if until is not None and datetime.now(UTC) >= until:
            return True
        return any(e.satisfies(waiting_for) for e in fresh)


def consumed_events(journal: Journal | None) -> set[str]:
    """Ids of events a journal has already consumed (signals drained, waits woken)."""
    if journal is None:
        return set()
    return set(History.build(journal.entries).consumed)


def wait_until(journal: Journal | None) -> datetime | None:
    """The time a journal's last ``wait`` entry sleeps until, if it is a timer."""
    for entry in reversed(journal.entries if journal else []):
        if entry.get("kind") == "wait":
            until = entry.get("until")
            if isinstance(until, str) and until:
                return datetime.fromisoformat(until.replace("Z", "+00:00"))
            return None
    return None


def read_tree_journal(forge: Forge, commit: str, brief_id: str) -> Journal | None:
    """Read (and verify) the journal stored in ``commit``; None when it has none."""
    prefix = journal_path(brief_id)
    done = run_git(
        ["archive", "--format=tar", commit, "--", prefix], git_dir=forge.cache, check=False
    )
    if done.returncode != 0:
        return None  # the path does not exist in that commit
    with tempfile.TemporaryDirectory(prefix="assay-journal-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(done.stdout)) as archive:
            archive.extractall(tmp, filter="data")
        return read_journal(Path(tmp) / prefix)


def _brief_files(forge: Forge, main: str) -> dict[str, bytes]:
    listing = run_git(
        ["ls-tree", "-r", "--name-only", main, "--", "briefs/"], git_dir=forge.cache
    ).stdout.decode()
    paths = [p for p in listing.splitlines() if is_brief_path(p)]
    blobs = forge.read_blobs([(main, p) for p in paths])
    return {path: blob for path, blob in zip(paths, blobs, strict=True) if blob is not None}


def _is_ancestor(forge: Forge, commit: str, main: str) -> bool:
    done = run_git(["merge-base", "--is-ancestor", commit, main], git_dir=forge.cache, check=False)
    return done.returncode == 0


def _has_path(forge: Forge, commit: str, path: str) -> bool:
    done = run_git(["cat-file", "-e", f"{commit}:{path}"], git_dir=forge.cache, check=False)
    return done.returncode == 0


def read_view(forge: Forge) -> ForgeView:
    """Read briefs, branches, claims, reviews and cancellations from the forge."""
    heads = forge.fetch([MAIN, BRANCHES])
    main = heads.get(MAIN)
    briefs: dict[str, Brief] = {}
    bad: dict[str, AssayError] = {}
    if main is not None:
        for path, blob in _brief_files(forge, main).items():
            try:
                brief = parse_brief(blob.decode("utf-8"), source=path)
            except UnicodeDecodeError:
                bad[path] = BadInput(f"{path}: not UTF-8 text")
                continue
            except AssayError as error:
                bad[path] = error
                continue
            briefs[brief.id] = brief
        try:
            check_dependencies(briefs.values())
        except AssayError as error:
            bad[str(error.details.get("source", "briefs/"))] = error
    branches = {
        ref.removeprefix(BRANCHES): sha for ref, sha in heads.items() if ref.startswith(BRANCHES)
    }
    reviews = forge.fetch("refs/assay/reviews/")
    # A branch only just created from main is an ancestor of main too; merged means its
    # journal (the run's work) reached main.
    merged = {
        brief
        for brief, tip in branches.items()
        if main is not None
        and _is_ancestor(forge, tip, main)
        and _has_path(forge, tip, journal_path(brief))
    }
    for ref, sha in reviews.items():
        raw = forge.read_blob(sha, "review.json")
        if raw is not None and b'"state": "merged"' in raw:
            merged.add(ref.removeprefix("refs/assay/reviews/"))
    claims = {record.brief: record for record in ClaimStore(forge).list()}
    cancelled: set[str] = set()
    event_refs = forge.fetch("refs/assay/events/")
    view = ForgeView(
        forge=forge,
        main=main,
        briefs=briefs,
        bad=bad,
        claims=claims,
        branches=branches,
        merged=merged,
        cancelled=cancelled,
    )
    for ref in event_refs:
        brief_id = ref.removeprefix("refs/assay/events/")
        if brief_id in briefs and any(e.kind == "cancel" for e in view.events(brief_id)):
            cancelled.add(brief_id)
    return view
