"""The demo's invariants, checked from what the forge and the model log say after the run.

Nothing here trusts a desk's account: double claims come from the history of each claim
ref and the fences in each branch journal; paid model calls from the scripted model's own
call log, and requests sent upstream again from the scripted upstream's request log (a
``--cli`` demo) and from each journal's fold; journal integrity from reading every
brief's journal (at its checkpoints) with its hash chain.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import assay.refs as refs
from assay.claims import CLAIM_FILE, claim_ref, parse_record
from assay.errors import AssayError
from assay.forge import Forge
from assay.journal import read_journal
from assay.journal.fold import fold


@dataclass
class Audit:
    """What the invariants found; ``problems`` names every violation."""

    double_claims: int = 0
    repaid_model_calls: int = 0
    model_calls: int = 0
    repeated_requests: int | None = None  # the upstream's own count (None: it keeps no log)
    journal_repeated_requests: int = 0  # model steps the journals say were sent again
    journal_model_steps: int = 0
    journal_steps: int = 0
    problems: list[str] = field(default_factory=list)


def repeated_requests(request_log: Path) -> int | None:
    """Conversation requests received again for a brief and turn already received, from
    the upstream's own request log (None when there is none: not a ``--cli`` demo)."""
    if not request_log.exists():
        return None
    return repaid_calls(request_log)[1]


def repaid_calls(call_log: Path) -> tuple[int, int]:
    """``(answered calls, calls answered again for a brief and turn already answered)``."""
    if not call_log.exists():
        return 0, 0
    seen = Counter(
        (record.get("brief"), record.get("turn"))
        for record in map(json.loads, call_log.read_text(encoding="utf-8").splitlines())
    )
    return sum(seen.values()), sum(count - 1 for count in seen.values())


def claim_history_violations(forge: Forge, brief: str) -> list[str]:
    """Every place the claim ref's history shows two holders at one fence, or a fence going back."""
    ref = claim_ref(brief)
    tip = forge.refresh([ref]).get(ref)
    if tip is None:
        return []
    problems = []
    holders: dict[int, str] = {}
    last_fence = 0
    for commit in reversed(forge.history(tip)):
        raw = forge.read_blob(commit, CLAIM_FILE)
        if raw is None:
            continue
        record = parse_record(raw, ref=ref, sha=commit)
        if record.fence < last_fence:
            problems.append(f"{brief}: fence went back from {last_fence} to {record.fence}")
        last_fence = max(last_fence, record.fence)
        if record.state == "held":
            first = holders.setdefault(record.fence, record.holder)
            if first != record.holder:
                problems.append(
                    f"{brief}: fence {record.fence} held by {first} and by {record.holder}"
                )
    return problems


def journal_violations(forge_path: Path, brief: str, audit: Audit) -> list[str]:
    """Read the brief's journal at its checkpoints (chain checked): the journal ref, else a
    branch written before it; a fence going back is a double claim."""
    from assay import odb

    tip = odb.read_ref(forge_path, refs.journal_ref(brief)) or odb.read_ref(
        forge_path, refs.branch_ref(brief)
    )
    if tip is None:
        return []  # no checkpoint: the brief never ran
    with tempfile.TemporaryDirectory(prefix="assay-demo-audit-") as scratch:
        folder = f".assay/journal/{brief}"
        odb.extract(forge_path, tip, folder, Path(scratch))
        try:
            journal = read_journal(Path(scratch) / folder)
        except AssayError as error:
            return [f"{brief}: journal unreadable: {error.message}"]
    facts = fold(journal.entries)
    audit.journal_steps += facts.ok_steps
    audit.journal_model_steps += facts.ok_model_calls
    audit.journal_repeated_requests += facts.repeated_requests
    return [f"{brief}: journal entry {seq} from an older fence" for seq in facts.fence_went_back]


def audit_run(forge: Forge, forge_path: Path, briefs: list[str], call_log: Path) -> Audit:
    """Check every invariant the demo promises; see ``Audit``."""
    audit = Audit()
    audit.model_calls, audit.repaid_model_calls = repaid_calls(call_log)
    audit.repeated_requests = repeated_requests(call_log.with_name("model-requests.jsonl"))
    for brief in briefs:
        claims = claim_history_violations(forge, brief)
        journal = journal_violations(forge_path, brief, audit)
        audit.double_claims += len(claims) + sum("fence" in text for text in journal)
        audit.problems += claims + journal
    if audit.repaid_model_calls:
        audit.problems.append(f"{audit.repaid_model_calls} model call(s) were paid twice")
    # The journals' count is an upper bound (a kill just before the first send is counted,
    # and so is a side request the upstream's log leaves out); below the upstream's own
    # count, a repeated request went unrecorded.
    upstream = audit.repeated_requests
    if upstream is not None and upstream > audit.journal_repeated_requests:
        audit.problems.append(
            f"the upstream received {upstream} request(s) again but the journals record "
            f"{audit.journal_repeated_requests}"
        )
    return audit
