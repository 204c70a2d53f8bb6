"""Where a ``cli`` desk's CLI starts, and its session state at each conversation turn.

Three ways a process of a cli run begins (``Start``):

- **ended**: the journal holds the CLI's exit (``compute:cli.exit``); nothing is launched,
  the run goes on from there (an approval after the CLI's exit, the evidence);
- **native**: the profile resumes its CLI's own session (``CliProfile.resume``) and the
  checkpoint holds a resume point (``assay.agentcli.sessionstate``): the work tree is
  restored to the checkpoint the point was captured in, the session files are restored
  into the CLI's fresh HOME, and the CLI resumes its session; only the journal's calls from
  the point on are pending (at most the turn it resumes at, and the tool steps of its
  answer);
- **relaunch**: anything else (a CLI that cannot resume natively, a run stopped before its
  first point, a point that is not valid): the work tree is restored to ``cli.base`` and
  the CLI starts from the beginning, its requests answered from the journal by digest.

While the CLI runs, ``SessionKeeper.capture_turn`` records its session files before each
live conversation turn's durability point (after waiting, briefly, for a CLI that writes
its session behind its requests to record the request's tool results), so each checkpoint
carries a consistent pair: the files and the session that produced them.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from assay.agentcli.profiles import CliProfile
from assay.agentcli.sessiondb import DatabaseRefused
from assay.agentcli.sessionstate import (
    ResumePoint,
    StateRefused,
    capture,
    covers,
    load_point,
    point_commit,
    restore,
    session_files,
)
from assay.gateway.wire import tool_pairs
from assay.runtime.wire import END, WIRE, WireRequest

# How long a turn waits for the CLI to record its tool results. A CLI writes its session
# on a timer of its own (Claude Code about every 100 ms); on a loaded machine that timer
# runs late by seconds, and a turn not waited for is no resume point (its tools run
# again on resume). Only a CLI that never records the results waits this long.
COVER_WAIT_S = 15.0
COVER_POLL_S = 0.01

Method = Literal["ended", "native", "relaunch"]


@dataclass(frozen=True)
class Start:
    """How this process's CLI starts (module docstring): ``resume_at`` is the first
    journal position still pending (None: every recorded call of the session is), and
    ``commit`` the checkpoint whose files the work tree gets."""

    method: Method
    commit: str
    resume_at: int | None = None
    point: ResumePoint | None = None


class SessionKeeper:
    """The CLI's session state for one process of a cli run (module docstring)."""

    def __init__(
        self,
        run: Any,
        profile: CliProfile,
        *,
        tree: Path,
        brief: str,
        head: Callable[[], str],
        withheld: list[str],
        warn: Callable[[str], None],
    ) -> None:
        self.run = run
        self.profile = profile
        self.tree = tree
        self.brief = brief
        self.head = head
        self.withheld = withheld
        self.warn = warn
        self.home: Path | None = None
        self.point: ResumePoint | None = None
        self.session = self._session_id()

    def _session_id(self) -> str:
        """The id the desk gives a CLI that lets it name its session: the same for every
        process of the run."""
        resume = self.profile.resume
        if resume is None or not resume.named:
            return ""
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"assay:cli-session:{self.run.run_id}"))

    # -------------------------------------------------------------------- the start

    def start(self, base: str) -> Start:
        """How the CLI starts in this process (``base``: the commit of ``cli.base``)."""
        history = self.run.history.positions
        later = sorted(p for p in history if p > self.run.pos)
        ended = next((p for p in later if history[p].label == END), None)
        if ended is not None:
            return Start("ended", self.head(), resume_at=ended)
        point = self._point()
        if point is None or not self._leads_on(point, later):
            return Start("relaunch", base)
        import pygit2

        try:
            commit = point_commit(self.tree / ".git", self.head(), self.brief)
        except (KeyError, ValueError, pygit2.GitError) as exc:
            self.warn(f"the session's checkpoint cannot be read ({exc}): relaunching")
            return Start("relaunch", base)
        self.point = point
        self.session = point.session or self.session
        return Start("native", commit, resume_at=point.at, point=point)

    def _leads_on(self, point: ResumePoint, later: list[int]) -> bool:
        """Whether the point's session leads to a call of this run: one the journal holds,
        or the next one (refused before it was recorded: a spent budget)."""
        if point.at in later:
            return bool(self.run.history.positions[point.at].label == WIRE)
        return point.at > max(later, default=self.run.pos)

    def _point(self) -> ResumePoint | None:
        resume = self.profile.resume
        if resume is None:
            return None
        try:
            return load_point(self.tree, self.brief, resume, profile=self.profile.name)
        except FileNotFoundError:
            return None
        except StateRefused as refused:
            self.warn(f"the CLI's session state is not used ({refused}): relaunching")
            return None

    def restore_home(self, start: Start, home: Path) -> None:
        """Put the resume point's session files into ``home`` (the CLI's fresh HOME)."""
        self.home = home
        if start.point is not None:
            restore(start.point, tree=self.tree, brief=self.brief, home=home)

    # ------------------------------------------------------------------- a turn

    def capture_turn(self, pos: int, request: WireRequest) -> None:
        """Record the CLI's session as of the turn at ``pos`` (``WireSession.on_turn``):
        its files once they record each tool result the request carries. A turn that
        carries none (the first) is not a point: a relaunch repeats nothing before it."""
        resume, home = self.profile.resume, self.home
        if resume is None or home is None:
            return
        ids = [pair["id"] for pair in tool_pairs(request.api, request.items)]
        if not ids:
            return
        fresh = [t["id"] for t in request.tools] or ids[-1:]
        deadline = time.monotonic() + COVER_WAIT_S
        while True:
            try:
                files = session_files(home, resume)
            except StateRefused as refused:
                self.warn(f"the CLI's session state is not recorded ({refused})")
                return
            if files and covers(files, resume, fresh):
                break
            if time.monotonic() > deadline:
                self.warn(
                    f"the CLI had not recorded its session as of call {pos} after "
                    f"{COVER_WAIT_S:g} s: a resume starts from the checkpoint before"
                )
                return
            time.sleep(COVER_POLL_S)  # the CLI writes its session on a timer of its own
        try:
            self.point = capture(
                files,
                tree=self.tree,
                brief=self.brief,
                profile=self.profile.name,
                session=self.session,
                at=pos,
                withheld=self.withheld,
                previous=self.point,
                databases=resume.databases,
            )
        except DatabaseRefused as refused:  # nothing written: the point before stands
            self.warn(f"the CLI's session state is not recorded ({refused})")

    def seen_tool_ids(self) -> set[str]:
        """The agent's tool calls the journal already lists (a natively resumed CLI sends
        them all again in its first request; they are not new)."""
        seen: set[str] = set()
        for rec in self.run.history.positions.values():
            for tool in (rec.result or {}).get("tools") or []:
                if isinstance(tool, dict) and isinstance(tool.get("id"), str):
                    seen.add(tool["id"])
        return seen
