"""The gate's own ``assay/evidence`` check run: what each verify publishes, and what a merge
on GitHub accepts.

On GitHub a desk job's token is the same app as the gate's (``github-actions``): it may
create check runs named ``assay/evidence`` on any commit and update any run that app made.
What it cannot make is the gate's signature, so the gate puts one in the check run's
``external_id``:

    <brief>:<workflow run id>:<pass|fail>:<evidence tip or ->:<events tip or ->:<signature>

signed over the brief, the head sha, the verdict, the evidence ref's tip, the brief's
events ref's tip (the answers the verdict counted), the check run's own id and name, and
the gate's workflow run (``proof_payload``). The id binding matters: a
desk that kept an old passing proof cannot paste it onto a newer run, and runs cannot be
deleted by a token. The name binding matters because the same app may rename a run: a desk
that renamed the gate's red run out of the way is seen (the signed name differs from the
run's). The workflow run must be a run of main's ``.github/workflows/assay-gate.yml``
(``GET actions/runs/{id}``): a proof made by a gate started on a desk's branch, or by a
key used outside the gate's workflow, is not one.

- Publishing (``publish_gate_check``): the check runs at the head are re-read from GitHub,
  never from the desk-writable mirror record. When the newest run the gate proved says
  what this verify found (verdict and evidence tip), nothing is written. Otherwise a new run
  is created, then completed with the proof bound to its id: a fail after a pass at the
  same head makes the newest run (the one GitHub shows) red. Old runs are not updated in
  place, because the desk's token, being the same app, could put an old proof back.
- Reading (``gate_check_problems``): the head's check runs are listed in full
  (``filter=all``, every page: GitHub's default lists only the run of each name completed
  last, and the desk's app can set ``completed_at``). Among the runs of the expected app
  named ``assay/evidence`` or carrying a valid proof, the newest one (by id, which nobody
  sets) that is not another brief's proven run must carry a valid proof for this brief,
  at this head, bound to its id, under the name it was signed with, from a run of main's
  gate workflow, with verdict ``pass`` and conclusion ``success``;
  a run by any other app is ignored (it cannot block or pass), and a newer unproven run
  of the expected app refuses the merge (fail closed: a desk can delay its own merge, not
  make one). The proof's evidence tip must be the tip the merge read, or an ancestor of
  it: a desk that force-pushed the evidence ref back past the gate's records is caught by
  a gate with a cold cache, from what only the gate can write. The same holds for the
  events ref: pushed back past an answer the gate counted (a signed ``/assay reject``
  followed by a new approval, rolled back to the first), the merge is refused.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from assay.errors import AssayError
from assay.evidence.keys import GateKey, PublicKey, split_signature
from assay.forge import Forge
from assay.github.api import GitHubApi
from assay.github.rest import GitHubNotFound

CHECK_NAME = "assay/evidence"
GATE_WORKFLOW = ".github/workflows/assay-gate.yml"
EXPECTED_APP = "github-actions"  # the app every workflow's GITHUB_TOKEN acts as
PROOF_KIND = "github-gate-check"
VERDICTS = ("pass", "fail")


def proof_payload(
    *,
    brief: str,
    head_sha: str,
    verdict: str,
    tip: str | None,
    events: str | None,
    check: int,
    run: str,
) -> bytes:
    """The bytes the gate signs for one check run (named ``CHECK_NAME``, made by the gate's
    workflow run ``run``)."""
    body = {
        "v": 2,
        "kind": PROOF_KIND,
        "brief": brief,
        "head": head_sha,
        "verdict": verdict,
        "tip": tip,
        "events": events,
        "check": check,
        "name": CHECK_NAME,
        "run": run,
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


@dataclass(frozen=True)
class GateProof:
    """The proof in a gate check run's ``external_id`` (see the module docstring)."""

    brief: str
    run: str  # the workflow run that published it ("" outside Actions)
    verdict: str
    tip: str | None
    events: str | None
    sig: str

    @property
    def external_id(self) -> str:
        tips = f"{self.tip or '-'}:{self.events or '-'}"
        return f"{self.brief}:{self.run}:{self.verdict}:{tips}:{self.sig}"

    @classmethod
    def parse(cls, text: str) -> GateProof | None:
        parts = text.split(":", 5)
        if len(parts) != 6 or parts[2] not in VERDICTS or not parts[5]:
            return None
        brief, run, verdict, tip, events, sig = parts
        return cls(
            brief, run, verdict, None if tip == "-" else tip, None if events == "-" else events, sig
        )

    def signed_by(self, key: PublicKey, *, head_sha: str, check: int) -> bool:
        try:
            _, signature = split_signature(self.sig, source="check run external_id")
        except AssayError:
            return False
        payload = proof_payload(
            brief=self.brief,
            head_sha=head_sha,
            verdict=self.verdict,
            tip=self.tip,
            events=self.events,
            check=check,
            run=self.run,
        )
        return key.verifies(signature, payload)


@dataclass(frozen=True)
class GateRun:
    """One check run of the expected app, and its proof when it carries a valid one."""

    run: dict[str, Any]
    proof: GateProof | None

    @property
    def id(self) -> int:
        return int(self.run["id"])


def app_runs(api: GitHubApi, head_sha: str) -> list[dict[str, Any]]:
    """Every check run the expected app made at ``head_sha``, whatever its name, oldest
    first (by id: GitHub assigns it, no job can set it)."""
    runs = [
        run
        for run in api.check_runs(head_sha)
        if str((run.get("app") or {}).get("slug") or "") == EXPECTED_APP
    ]
    return sorted(runs, key=lambda run: int(run.get("id") or 0))


def _proven(run: Mapping[str, Any], key: PublicKey | None, head_sha: str) -> GateProof | None:
    proof = GateProof.parse(str(run.get("external_id") or ""))
    if proof is None or key is None:
        return None
    return proof if proof.signed_by(key, head_sha=head_sha, check=int(run["id"])) else None


def newest_gate_run(
    api: GitHubApi, key: PublicKey | None, *, brief: str, head_sha: str
) -> GateRun | None:
    """The newest run of the expected app at ``head_sha`` named ``CHECK_NAME`` or proven
    (a proven run renamed since still counts, under its old name) that is not another
    brief's proven run (None: there is none); its ``proof`` is None unless the gate signed
    it."""
    for run in reversed(app_runs(api, head_sha)):
        proof = _proven(run, key, head_sha)
        if proof is None and run.get("name") != CHECK_NAME:
            continue  # another job's run of the same app (every workflow job is one)
        if proof is not None and proof.brief != brief:
            continue  # the gate's run of another brief at the same commit
        return GateRun(dict(run), proof)
    return None


def gate_run_problems(api: GitHubApi, run: str) -> list[str]:
    """Why the workflow run ``run`` is not a run of main's gate workflow (empty: it is)."""
    if not run.isdigit():
        return ["it names no workflow run: it was not published by the gate's workflow"]
    try:
        found = api.workflow_run(int(run))
    except GitHubNotFound:
        return [f"its workflow run {run} does not exist"]
    path, branch = str(found.get("path") or ""), str(found.get("head_branch") or "")
    if path.split("@", 1)[0] != GATE_WORKFLOW or branch != "main":
        return [
            f"its workflow run {run} ran {path or 'no workflow'} on {branch or 'no branch'}, "
            f"not {GATE_WORKFLOW} on main"
        ]
    return []


def gate_check_problems(
    forge: Forge,
    api: GitHubApi,
    key: PublicKey | None,
    *,
    brief: str,
    head_sha: str,
    tip: str | None,
    events: str | None,
) -> list[str]:
    """Why the gate's own check run does not let ``brief`` merge at ``head_sha`` with the
    evidence ref at ``tip`` and the events ref at ``events`` (empty: it does); see the
    module docstring."""
    where = f"{CHECK_NAME} check run at {head_sha[:12]}"
    if key is None:
        return [f"no gate public key to check the {where} check run with"]
    found = newest_gate_run(api, key, brief=brief, head_sha=head_sha)
    if found is None:
        return [f"no {where} from the gate ({EXPECTED_APP})"]
    proof, number = found.proof, found.id
    if proof is None:
        return [
            f"the newest {where} ({number}) carries no gate signature for {brief}: "
            "any job with the same app token could have made it"
        ]
    if found.run.get("name") != CHECK_NAME:
        return [
            f"the gate's newest run at {head_sha[:12]} ({number}) was renamed from "
            f"{CHECK_NAME} to {found.run.get('name')!r}: only the gate's app can, and a "
            "run it renamed hides its verdict from the ruleset"
        ]
    if proof.verdict != "pass" or found.run.get("conclusion") != "success":
        return [
            f"the gate's newest {where} ({number}) is {proof.verdict} "
            f"({found.run.get('conclusion')})"
        ]
    unproven = gate_run_problems(api, proof.run)
    if unproven:
        return [f"the gate's newest {where} ({number}): {unproven[0]}"]
    if proof.tip is not None and not _descends(forge, tip, from_tip=proof.tip):
        return [
            f"evidence rollback: the gate's check run {number} names evidence tip "
            f"{proof.tip[:12]}, and the evidence ref is at {(tip or 'nothing')[:12]}, "
            "which does not descend from it"
        ]
    if proof.events is not None and not _descends(forge, events, from_tip=proof.events):
        return [
            f"events rollback: the gate's check run {number} counted the events ref at "
            f"{proof.events[:12]}, and it is at {(events or 'nothing')[:12]}, which does not "
            "descend from it"
        ]
    return []


def _descends(forge: Forge, tip: str | None, *, from_tip: str) -> bool:
    """Whether the ``tip`` of a ref is ``from_tip`` or a descendant of it (a commit this
    cache never fetched is no ancestor of a tip it did)."""
    if tip == from_tip:
        return True
    return tip is not None and forge.has_commit(from_tip) and forge.is_ancestor(from_tip, tip)


def publish_gate_check(
    api: GitHubApi,
    *,
    brief: str,
    head_sha: str,
    passed: bool,
    tip: str | None,
    events: str | None = None,
    title: str,
    summary: str,
    text: str,
    key: GateKey | None,
    environ: Mapping[str, str] | None = None,
) -> tuple[int, bool]:
    """Publish this verify's verdict at ``head_sha`` (see the module docstring); returns
    ``(check run id, whether a run was written)``. Without the gate's private key the run
    is published unproven: people see it, and no merge accepts it."""
    verdict = "pass" if passed else "fail"
    conclusion = "success" if passed else "failure"
    public = key.public if key is not None else None
    current = newest_gate_run(api, public, brief=brief, head_sha=head_sha)
    if (
        current is not None
        and current.proof is not None
        and (current.proof.verdict, current.proof.tip, current.proof.events)
        == (verdict, tip, events)
        and current.run.get("conclusion") == conclusion
        and current.run.get("name") == CHECK_NAME
    ):
        return current.id, False
    run_id = (os.environ if environ is None else environ).get("GITHUB_RUN_ID", "").strip()
    run = run_id if run_id.isdigit() else ""
    pending = f"{brief}:{run}"
    output = {"title": title, "summary": summary[:65535], "text": text[:65535]}
    number = api.create_check_run(
        name=CHECK_NAME,
        head_sha=head_sha,
        conclusion=None if key is not None else conclusion,
        title=title,
        summary=summary,
        text=text,
        external_id=pending,
    )
    if key is None:
        return number, True
    payload = proof_payload(
        brief=brief,
        head_sha=head_sha,
        verdict=verdict,
        tip=tip,
        events=events,
        check=number,
        run=run,
    )
    proof = GateProof(brief, run, verdict, tip, events, key.sign(payload))
    api.update_check_run(
        number,
        {
            "status": "completed",
            "conclusion": conclusion,
            "external_id": proof.external_id,
            "output": output,
        },
    )
    return number, True
