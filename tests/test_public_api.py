"""The public API re-exported from ``assay``: pinned, sorted, importable and lazy."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import assay
from tests.conftest import assay_env

PUBLIC = [
    "AssayError",
    "BadInput",
    "BranchSync",
    "Brief",
    "Budget",
    "Busy",
    "Claim",
    "ClaimRecord",
    "ClaimStore",
    "Corrupt",
    "Denied",
    "DeskManifest",
    "Diverged",
    "Event",
    "Failed",
    "Fenced",
    "Forge",
    "ForgeServer",
    "ForgeUnavailable",
    "Heartbeat",
    "Identity",
    "Internal",
    "Journal",
    "JournalSummary",
    "JournalWriter",
    "LocalEventStore",
    "MergeDecision",
    "ModelAdapter",
    "ModelReply",
    "Paused",
    "PushOutcome",
    "RefLog",
    "RefUpdate",
    "ReplayResult",
    "Replayer",
    "Run",
    "RunHooks",
    "RunResult",
    "SandboxSpec",
    "SandboxUnavailable",
    "Suspended",
    "Suspension",
    "ToolBox",
    "Unavailable",
    "UsageError",
    "VerifyReport",
    "__version__",
    "build_model",
    "decide",
    "execute",
    "execute_run",
    "fingerprint",
    "init_forge",
    "load_brief_dir",
    "load_briefs",
    "load_desks",
    "load_target",
    "merge",
    "merge_batch",
    "merge_decision",
    "open_forge",
    "parse_brief",
    "read_journal",
    "run_sandboxed",
    "secrets_from_env",
    "start_sandboxed",
    "summarize",
    "verify",
]


def test_all_is_pinned_and_sorted() -> None:
    assert assay.__all__ == PUBLIC
    assert assay.__all__ == sorted(assay.__all__)


def test_every_public_name_is_importable_and_listed_by_dir() -> None:
    names = dir(assay)
    for name in assay.__all__:
        value = getattr(assay, name)
        assert value is not None, name
        assert name in names, name
        if name != "__version__":
            assert getattr(value, "__name__", name) == name, name  # the object, not a module
            assert not inspect.ismodule(value), name


def test_reexports_are_the_defining_objects() -> None:
    from assay.evidence import fingerprint
    from assay.forge.records import RefLog
    from assay.runtime import Run

    assert assay.Run is Run
    assert assay.RefLog is RefLog
    assert assay.fingerprint is fingerprint


def test_unknown_attribute_is_an_attribute_error() -> None:
    try:
        assay.no_such_name  # noqa: B018
    except AttributeError as error:
        assert "no_such_name" in str(error)
    else:
        raise AssertionError("assay.no_such_name did not raise")


def test_import_assay_imports_no_area() -> None:
    code = "import json, sys, assay\nprint(json.dumps(sorted(sys.modules)))\n"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=assay_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    loaded = {m for m in json.loads(done.stdout) if m.startswith("assay")}
    assert loaded == {"assay", "assay.errors"}
    assert not {"pydantic", "rich", "httpx", "click"} & set(json.loads(done.stdout))
