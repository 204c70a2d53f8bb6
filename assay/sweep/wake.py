"""The waker for one brief, as a lean process: ``python -m assay.sweep.wake --brief B``.

This is what the forge's receive hook starts on every push to an events ref, so its start-up
time is part of the wake latency: it imports only the forge, claims and sweep modules (not
the whole CLI, the runtime or the model adapters). ``assay sweep wake`` runs the same code.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from assay.errors import AssayError, BadInput
from assay.sweep.policy import SweepPolicy, WakerPolicy, default_policies, load_policies

DEFAULT_SWEEPERS = "sweepers"


def policies_from(directory: str | None) -> list[SweepPolicy]:
    """``--sweepers DIR``, else ``./sweepers`` when it exists, else one of each kind."""
    if directory is not None:
        return load_policies(Path(directory))
    if Path(DEFAULT_SWEEPERS).is_dir():
        return load_policies(Path(DEFAULT_SWEEPERS))
    return default_policies()


def local_dispatcher(forge: Any) -> Any:
    """Start woken desks as local processes, logging under ``$ASSAY_WAKE_LOG_DIR`` (or the
    forge cache's ``wake-logs/``)."""
    from assay.sweep.dispatch import dispatch_local

    log_dir = Path(os.environ.get("ASSAY_WAKE_LOG_DIR") or forge.state_dir / "wake-logs")

    def dispatch(brief: str, desk: str, url: str, policy: WakerPolicy) -> int:
        return dispatch_local(brief, desk, url, log_dir=log_dir, desks_dir=policy.desks_dir).pid

    return dispatch


def wake_one(brief: str, *, forge_spec: str | None, sweepers: str | None = None) -> Any:
    """Run the waker policies for ``brief`` once; the ``SweepReport``."""
    from assay.forge import open_forge
    from assay.sweep.engine import run_sweep

    policies = [p for p in policies_from(sweepers) if isinstance(p, WakerPolicy)]
    if not policies:
        raise BadInput("--sweepers: no policy of kind 'waker' is configured")
    with open_forge(forge_spec) as forge:
        return run_sweep(forge, policies, only_brief=brief, dispatcher=local_dispatcher(forge))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m assay.sweep.wake", description=__doc__)
    parser.add_argument("--brief", required=True)
    parser.add_argument("--forge", default=os.environ.get("ASSAY_FORGE"))
    parser.add_argument("--sweepers", default=None)
    args = parser.parse_args(argv)
    try:
        report = wake_one(args.brief, forge_spec=args.forge, sweepers=args.sweepers)
    except AssayError as error:
        print(f"assay: {error.status}: {error.message}", file=sys.stderr)
        return error.code
    for action, outcome in zip(report.actions, report.outcomes, strict=False):
        print(f"{report.at.isoformat()} {action.action} {action.brief}: {outcome}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
