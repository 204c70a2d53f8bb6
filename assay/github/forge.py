"""``GitHubForge``: the git layer of every forge, plus GitHub's API layer beside it.

Claims, journals, branches, events and mirror records travel over git exactly as on the
embedded forge (``Forge``), against GitHub's git endpoint, so they cost no REST call. The
API layer (``GitHubForge.api``) is the REST client for what only GitHub has: issues as
briefs, the claim mirror, draft pull requests, check runs, comments as events, dispatches.
``open_forge("github:OWNER/REPO")`` lands in ``open_github_forge``.

GitHub recommends at most :data:`PUSHES_PER_MINUTE` pushes a minute per repository and
refuses (the fake GitHub) or slows what goes over: every push of a ``GitHubForge`` goes
through the host's push ledger (``push_gate``, :mod:`assay.forge.pushledger`), shared by
every desk on the host that pushes to the repository.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import assay.refs as refs
from assay.briefs import Brief
from assay.errors import AssayError, Corrupt
from assay.forge import Forge
from assay.forge.budget import window_from_env
from assay.forge.pushledger import PushLedger
from assay.github.api import GitHubApi
from assay.github.rest import RestClient
from assay.github.target import GitHubTarget, resolve_target
from assay.plumbing import GitError, RefUpdate

LOG = logging.getLogger("assay.github.forge")

# GitHub's published repository limits: at most 6 pushes a minute per repository, and at
# most one merged pull request a minute (each merge re-checks every open one's mergeability).
PUSHES_PER_MINUTE = 6
MERGES_PER_MINUTE = 1


class GitHubForge(Forge):
    """A GitHub repository as a forge: ``Forge`` over its git endpoint + ``api``."""

    kind = "github"
    # GitHub recommends at most 6 pushes a minute per repository: a window, not every step.
    default_durability = "window"
    protects_custom_refs = False  # any job with contents: write moves refs/assay/*

    def __init__(
        self,
        target: GitHubTarget,
        *,
        cache_dir: Path | None = None,
        rest: RestClient | None = None,
    ) -> None:
        super().__init__(
            target.git_url,
            cache_dir=cache_dir,
            config=target.git_config(),
            display_url=target.spec,
        )
        self.target = target
        etags = self.state_dir.parent / f"{self.state_dir.name}.github-etags.json"
        self.rest = rest or RestClient(target.api_url, target.token, etag_cache=etags)
        self.api = GitHubApi(self.rest, target.owner, target.repo)
        self.push_ledger = PushLedger(
            self.state_dir.parent / f"{self.state_dir.name}.push-ledger.json",
            limit=PUSHES_PER_MINUTE,
            window=window_from_env(),
            name=target.spec,
            max_wait_s=self.rest.max_total_wait_s,
            charge=self.wait_charge(f"push to {target.spec}"),
        )

    def wait_charge(self, what: str) -> Callable[[float], None]:
        """Every push and merge budget wait is counted against the REST client's total for
        the command (``RestClient.charge_wait``), with its own REST waits."""
        return lambda seconds: self.rest.charge_wait(seconds, what=what)

    def running(self, workflow_runs: Collection[int]) -> frozenset[int]:
        """Of these workflow runs, those GitHub says are in progress (one conditional REST
        call, :meth:`GitHubApi.runs_in_progress`): a desk in an Actions job whose lease
        lapsed is alive while its run is, an external signal that costs no push."""
        if not workflow_runs:
            return frozenset()
        return self.api.runs_in_progress() & frozenset(workflow_runs)

    def merges_per_minute(self) -> int:
        """One merge a minute (GitHub's guidance), unless the settings record sets another.

        Any job with ``contents: write`` can write ``refs/assay/config`` here, so a record
        that does not read (``Corrupt``) keeps the default rather than stop every merge."""
        try:
            return super().merges_per_minute() or MERGES_PER_MINUTE
        except Corrupt as corrupt:
            LOG.warning("merge budget: %s; keeping one merge a minute", corrupt.message)
            return MERGES_PER_MINUTE

    def before_main_moves(self, top: str, *, key: Any = None) -> list[RefUpdate]:
        """Give ``top`` the gate's ``assay/evidence`` check before main moves to it.

        A ruleset requiring that check (the one ``assay init`` prints) judges a push to main
        by the pushed commit's own check runs, and a batch's top is a commit nobody has
        checked: so it is pushed first to ``refs/assay/merging`` (one ref, reused: the
        objects must be on GitHub for a check run to name them), and the gate, which has
        just verified the combined tree, publishes the check there (signed with ``key``
        when it has one). The main push deletes the ref again, in the same atomic push."""
        from assay.github.gatecheck import publish_gate_check

        current = self.refresh([refs.MERGING]).get(refs.MERGING)
        staged = self.push([RefUpdate(refs.MERGING, top, expected=current)])
        if not staged.ok:
            raise GitError(f"{refs.MERGING}: the batch's top was refused: {staged.detail}")
        publish_gate_check(
            self.api,
            brief="batch",
            head_sha=top,
            passed=True,
            tip=None,
            title="batch: verified on the combined tree",
            summary=f"every brief's rows verified passing on the batch's tree at {top[:12]}",
            text="",
            key=key,
        )
        return [RefUpdate(refs.MERGING, None, expected=top)]

    @property
    def push_gate(self) -> PushLedger:
        """The host's push ledger for this repository: every push waits for room in it."""
        return self.push_ledger

    def extra_briefs(self) -> tuple[dict[str, Brief], dict[str, AssayError]]:
        """Briefs from open issues labelled ``assay`` (one conditional REST call), and the
        malformed ones keyed by their source (``issue #N``): the shape of the desk view's
        ``briefs`` and ``bad``, for readers that add them to the briefs on main."""
        from assay.github.issues import issue_briefs

        found = issue_briefs(self)
        bad: dict[str, AssayError] = {
            str(
                error.details.get("source") or error.message.split(" line ")[0].split(":")[0]
            ): error
            for error in found.errors
        }
        return {key: value.brief for key, value in found.briefs.items()}, bad

    @property
    def secrets(self) -> list[str]:
        """Values that must never reach a journal, log or commit (for ``Run.open(secrets=)``)."""
        return [self.target.token]

    def close(self) -> None:
        self.rest.close()
        super().close()


def open_github_forge(
    spec: str, *, cache_dir: Path | None = None, token_env: str | None = None
) -> GitHubForge:
    """Open ``github:OWNER/REPO`` (see ``assay.github.target`` for the environment it reads)."""
    return GitHubForge(resolve_target(spec, token_env=token_env), cache_dir=cache_dir)
