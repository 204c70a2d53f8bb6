"""Repository rulesets on the fake GitHub: what a branch's rules refuse on a push and a merge.

A mixin of ``FakeGitHub``. Rulesets are given in the shape of GitHub's rulesets API (the
one ``assay init`` prints, ``assay.github.init.MAIN_RULESET``) and, as on GitHub, cover
branches only: a custom ref (``refs/assay/*``) is never protected, so any token with
write access moves or deletes one. The rules modelled, each refused as GitHub refuses it:

- ``deletion``: the branch cannot be deleted;
- ``non_fast_forward``: the branch cannot be moved to a commit that does not descend from
  it;
- ``required_status_checks``: a push must bring a commit whose newest check run of each
  required name (from the app ``integration_id`` names, when it names one) concluded
  ``success``; a pull request merges only when its head has them;
- ``pull_request``: the branch changes only through a pull request.

Pushes are judged by a ``pre-receive`` hook in the bare repository, which asks the fake (the
objects of the push are in quarantine then: ancestry is the hook's to read; check runs are
the fake's), so a refused push moves nothing and its client reads GitHub's ``GH013`` lines.
"""

from __future__ import annotations

import fnmatch
import json
import sys
import threading
from pathlib import Path
from typing import Any

from tests.github.fake_core import HttpError

ZERO = "0" * 40
RULES_PATH = "/_fake/rules"  # the hook's question; not part of GitHub's API
GITHUB_ACTIONS_APP_ID = 15368  # the GitHub Actions app's id on github.com

_HOOK = """#!{python}
# The fake GitHub's ruleset check (tests/github/fake_rules.py): ask the fake about each
# update of this push; print its refusal as GitHub does and refuse the whole push.
import json, os, subprocess, sys, urllib.request

updates = []
for line in sys.stdin:
    old, new, ref = line.split()
    ff = old == "{zero}" or new == "{zero}" or subprocess.run(
        ["git", "merge-base", "--is-ancestor", old, new]
    ).returncode == 0
    updates.append({{"ref": ref, "old": old, "new": new, "ff": ff}})
with open(os.path.join(os.environ.get("GIT_DIR", "."), "fake-github-url")) as handle:
    url = handle.read().strip() + "{path}"
body = json.dumps({{"user": os.environ.get("REMOTE_USER", ""), "updates": updates}}).encode()
request = urllib.request.Request(url, data=body, headers={{"Content-Type": "application/json"}})
with urllib.request.urlopen(request, timeout=30) as answer:
    refused = json.load(answer)["refused"]
for ref, reasons in refused.items():
    print(f"error: GH013: Repository rule violations found for {{ref}}.", file=sys.stderr)
    for reason in reasons:
        print(f"- {{reason}}", file=sys.stderr)
sys.exit(1 if refused else 0)
"""


class RulesMixin:
    """Rulesets and their verdicts (needs the fake's ``bare``, ``lock``, ``check_runs``)."""

    bare: Path
    lock: threading.RLock
    check_runs: dict[int, dict[str, Any]]
    rulesets: list[dict[str, Any]]

    def install_rules_hook(self, base_url: str) -> None:
        """Write the ``pre-receive`` hook and the URL it asks (once the server listens)."""
        (self.bare / "fake-github-url").write_text(base_url + "\n")
        hook = self.bare / "hooks" / "pre-receive"
        hook.write_text(_HOOK.format(python=sys.executable, zero=ZERO, path=RULES_PATH))
        hook.chmod(0o755)

    def _rules_for(self, ref: str) -> list[dict[str, Any]]:
        """The rules of every active ruleset whose conditions include branch ``ref``."""
        if not ref.startswith("refs/heads/"):
            return []  # rulesets target branches (and tags): custom refs are unprotected
        found: list[dict[str, Any]] = []
        for ruleset in self.rulesets:
            if ruleset.get("enforcement") != "active" or ruleset.get("target") != "branch":
                continue
            names = (ruleset.get("conditions") or {}).get("ref_name") or {}
            patterns = [
                "refs/heads/main" if p == "~DEFAULT_BRANCH" else p for p in names.get("include", [])
            ]
            excluded = names.get("exclude", [])
            if any(fnmatch.fnmatch(ref, p) for p in patterns) and not any(
                fnmatch.fnmatch(ref, p) for p in excluded
            ):
                found.extend(ruleset.get("rules") or [])
        return found

    def _check_problems(self, sha: str, rule: dict[str, Any]) -> list[str]:
        problems: list[str] = []
        for wanted in (rule.get("parameters") or {}).get("required_status_checks", []):
            context, app = wanted["context"], wanted.get("integration_id")
            with self.lock:
                runs = [
                    run
                    for run in self.check_runs.values()
                    if run["head_sha"] == sha
                    and run["name"] == context
                    and (app is None or run["app"]["id"] == app)
                ]
            newest = max(runs, key=lambda run: int(run["id"]), default=None)
            if newest is None:
                problems.append(f'Required status check "{context}" is expected.')
            elif newest.get("conclusion") != "success":
                problems.append(f'Required status check "{context}" has not succeeded.')
        return problems

    def rule_violations(
        self, ref: str, *, old: str, new: str, fast_forward: bool, checked: str, merge: bool
    ) -> list[str]:
        """Why branch ``ref`` may not move from ``old`` to ``new`` (empty: it may).
        ``checked`` is the commit whose check runs count (a push's new tip; a merged pull
        request's head); ``merge``: the move is a pull request's merge."""
        problems: list[str] = []
        for rule in self._rules_for(ref):
            kind = rule.get("type")
            if kind == "deletion" and new == ZERO:
                problems.append("Cannot delete this branch")
            elif kind == "non_fast_forward" and new != ZERO and not fast_forward:
                problems.append("Cannot force-push to this branch")
            elif kind == "pull_request" and not merge:
                problems.append("Changes must be made through a pull request.")
            elif kind == "required_status_checks" and new != ZERO:
                problems.extend(self._check_problems(checked, rule))
        return problems

    def handle_rules(self, raw: bytes) -> tuple[int, dict[str, str], bytes]:
        """The ``pre-receive`` hook's question: which of a push's updates the rules refuse."""
        asked = json.loads(raw)
        refused: dict[str, list[str]] = {}
        for update in asked["updates"]:
            problems = self.rule_violations(
                update["ref"],
                old=update["old"],
                new=update["new"],
                fast_forward=bool(update["ff"]),
                checked=update["new"],
                merge=False,
            )
            if problems:
                refused[update["ref"]] = problems
        body = json.dumps({"refused": refused}).encode()
        return 200, {"Content-Type": "application/json"}, body

    def refuse_merge(self, ref: str, *, base: str, commit: str, head: str) -> None:
        """``HttpError`` 405 when the rules of ``ref`` refuse merging a pull request whose
        head is ``head`` (as ``commit``, on ``base``)."""
        problems = self.rule_violations(
            ref, old=base, new=commit, fast_forward=True, checked=head, merge=True
        )
        if problems:
            raise HttpError(405, "Repository rule violations found\n\n" + "\n".join(problems))
