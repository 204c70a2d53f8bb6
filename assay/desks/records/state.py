"""One read of the forge for the desk layer: briefs on main, claims, merged and cancelled.

``read_view`` costs a handful of round trips whatever the number of briefs (one fetch of
main and the branches, one of the claims, one of the events); journals are read lazily,
only for waiting briefs whose wake condition must be judged. A malformed brief file does
not stop the other briefs: it is kept in ``bad`` and reported, and naming it with
``--brief`` is ``BadInput`` (exit 65) with the file and field.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

import assay.refs as refs
from assay.branch import read_branch_journal
from assay.briefs import Brief, check_dependencies, is_brief_path, parse_brief
from assay.desks.host.objectives import objective_events
from assay.desks.records.events import EventLog
from assay.errors import AssayError, BadInput
from assay.forge import Forge
from assay.forgestate.times import parse_time
from assay.journal import Journal
from assay.journal.fold import fold
from assay.states import arrival


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
    issues: bool = False  # whether the forge's issues were read too (GitHub)
    event_tips: dict[str, str] | None = None  # brief -> events ref tip, as fetched (None: unknown)
    journal_tips: dict[str, str] = field(default_factory=dict)  # brief -> journal ref tip
    _journals: dict[str, Journal | None] = field(default_factory=dict)
    _events: dict[str, list[Any]] = field(default_factory=dict)
    # brief -> notes on the event records the view's read skipped (never delivered)
    event_notes: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def require(self, brief_id: str) -> Brief:
        """The brief named on the command line, or the error that explains why not."""
        for path, error in self.bad.items():
            if brief_id in (PurePosixPath(path).stem, _issue_default_id(path)):
                raise error
        if brief_id not in self.briefs:
            where = "main (briefs/) or its issues" if self.issues else "main (briefs/)"
            raise BadInput(f"--brief: no brief {brief_id!r} on the forge's {where}")
        return self.briefs[brief_id]

    def events(self, brief_id: str) -> list[Any]:
        if brief_id not in self._events:
            log = EventLog(self.forge, brief_id)
            if self.event_tips is None:
                self._events[brief_id] = log.read()
            else:  # the view's own fetch brought every events ref: no fetch per brief
                tip = self.event_tips.get(brief_id)
                self._events[brief_id] = log.read(fetched=True, tip=tip)
        return self._events[brief_id]

    def journal(self, brief_id: str) -> Journal | None:
        """The journal at the brief's checkpoint (its journal ref's tip, else its branch's on
        a forge written before the journal ref), read once per view; None without one. The
        view only listed the tips: the tip's objects are fetched here, if needed."""
        if brief_id not in self._journals:
            journal = self.journal_tips.get(brief_id)
            ref = refs.journal_ref(brief_id) if journal else refs.branch_ref(brief_id)
            tip = self.forge.with_objects({ref: journal or self.branches.get(brief_id)})[ref]
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
        delivered = list(self.events(brief_id))
        brief = self.briefs.get(brief_id)
        if brief is not None:
            delivered += objective_events(brief, journal)
        found = arrival(
            waiting_for,
            delivered,
            consumed=consumed_events(journal),
            wait_until=wait_until(journal),
        )
        return found is not None


def consumed_events(journal: Journal | None) -> set[str]:
    """Ids of events a journal has already consumed (signals drained, waits woken)."""
    return set(fold(journal.entries).consumed) if journal is not None else set()


def wait_until(journal: Journal | None) -> datetime | None:
    """The time the journal's current timer wait ends (its fold's, as the sweepers read it);
    None when it does not wait on a timer or the time does not parse."""
    return parse_time(fold(journal.entries).wait_until) if journal is not None else None


def read_tree_journal(forge: Forge, commit: str, brief_id: str) -> Journal | None:
    """Read (and verify) the journal stored in ``commit``; None when it has none."""
    with tempfile.TemporaryDirectory(prefix="assay-journal-") as tmp:
        return read_branch_journal(forge, commit, brief_id, Path(tmp))


def _brief_files(forge: Forge, main: str) -> dict[str, bytes]:
    paths = [p for p in forge.list_tree(main, "briefs") if is_brief_path(p)]
    blobs = forge.read_blobs([(main, p) for p in paths])
    return {path: blob for path, blob in zip(paths, blobs, strict=True) if blob is not None}


# Parsed brief files of a long-running desk, reused across views: by main's commit (nothing
# is read when main has not moved), then by path and content (only changed files are parsed).
_MAIN_BRIEFS: dict[str, dict[str, Brief | AssayError]] = {}
_PARSED: dict[tuple[str, bytes], Brief | AssayError] = {}
_PARSED_MAX = 20_000


def _main_briefs(forge: Forge, main: str) -> dict[str, Brief | AssayError]:
    """``{path: Brief or the error that file raised}`` of ``briefs/`` on ``main``."""
    cached = _MAIN_BRIEFS.get(main)
    if cached is not None:
        return cached
    if len(_PARSED) > _PARSED_MAX:
        _PARSED.clear()
    found: dict[str, Brief | AssayError] = {}
    for path, blob in _brief_files(forge, main).items():
        key = (path, blob)
        if key not in _PARSED:
            _PARSED[key] = _parse_file(path, blob)
        found[path] = _PARSED[key]
    _MAIN_BRIEFS.clear()  # only the latest main is worth keeping
    _MAIN_BRIEFS[main] = found
    return found


def _parse_file(path: str, blob: bytes) -> Brief | AssayError:
    try:
        return parse_brief(blob.decode("utf-8"), source=path)
    except UnicodeDecodeError:
        return BadInput(f"{path}: not UTF-8 text")
    except AssayError as error:
        return error


def _issue_default_id(source: str) -> str | None:
    """``issue-N`` for a bad issue brief keyed ``issue #N`` (the id it would have had)."""
    number = source.removeprefix("issue #")
    return f"issue-{number}" if number != source and number.isdigit() else None


def add_extra_briefs(forge: Forge, briefs: dict[str, Brief], bad: dict[str, AssayError]) -> bool:
    """Add the forge's own briefs (a GitHub forge's ``assay`` issues) beside main's.

    A forge without ``extra_briefs`` (the embedded forge) adds nothing and costs nothing.
    An issue brief whose id is already a file on main is reported, not taken: the file wins.
    """
    extra = getattr(forge, "extra_briefs", None)
    if not callable(extra):
        return False
    found, problems = extra()
    for brief_id, brief in found.items():
        if brief_id in briefs:
            source = brief.source or brief_id
            bad[source] = BadInput(
                f"{source}: brief id {brief_id!r} is already used by {briefs[brief_id].source}",
                source=source,
            )
            continue
        briefs[brief_id] = brief
    bad.update(problems)
    return True


def read_view(forge: Forge) -> ForgeView:
    """Read briefs, branches, claims, reviews and cancellations from the forge.

    Briefs are the files ``briefs/*.md`` on main plus, on a forge that has them, its own
    (``forge.extra_briefs()``: a GitHub forge's open issues labelled ``assay``, one
    conditional REST call); a malformed one of either kind is kept in ``bad``.
    """
    from assay.forgestate.source import read_snapshot

    # One fetch; every claim, event and review record decoded by its owner's strict decoder.
    # Main's briefs are parsed here (as Briefs, kept per main): not as the board's too.
    snapshot = read_snapshot(forge, journals=False, briefs=False, extra_briefs=False)
    main = snapshot.main or None
    briefs: dict[str, Brief] = {}
    bad: dict[str, AssayError] = {}
    if main is not None:
        for path, parsed in _main_briefs(forge, main).items():
            if isinstance(parsed, Brief):
                briefs[parsed.id] = parsed
            else:
                bad[path] = parsed
    issues = add_extra_briefs(forge, briefs, bad)
    if briefs:
        try:
            check_dependencies(briefs.values())
        except AssayError as error:
            bad[str(error.details.get("source", "briefs/"))] = error
    for brief_id, refused in sorted(snapshot.invalid.items()):
        # A record that fails its check stops only its brief; --brief names the error.
        if brief_id in briefs:
            bad[str(refused.details.get("ref") or brief_id)] = refused
            del briefs[brief_id]
    branches = {brief: snapshot.branch(brief) for brief in snapshot.branches()}
    view = ForgeView(
        forge=forge,
        main=main,
        briefs=briefs,
        bad=bad,
        claims={brief: claim.record for brief, claim in snapshot.claims.items()},
        branches=branches,
        merged={brief for brief in set(branches) | set(briefs) if snapshot.is_merged(brief)},
        cancelled={brief for brief in briefs if snapshot.cancelled(brief)},
        issues=issues,
        event_tips={
            ref.removeprefix(refs.EVENTS): sha
            for ref, sha in snapshot.refs.items()
            if ref.startswith(refs.EVENTS)
        },
        journal_tips={
            ref.removeprefix(refs.JOURNALS): sha
            for ref, sha in snapshot.refs.items()
            if ref.startswith(refs.JOURNALS)
        },
    )
    view.event_notes = dict(snapshot.event_notes)
    view._events = {
        brief: [event.record for event in events] for brief, events in snapshot.events.items()
    }
    return view
