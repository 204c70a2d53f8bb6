"""Record the golden journals of ``desks/golden_desk.py`` (run by hand when the format
changes on purpose: ``python -m tests.runtime.make_golden``)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from assay.runtime import Event, LocalEventStore, execute
from tests.runtime.desks import golden_desk

GOLDEN = Path(__file__).resolve().parent / "golden"


class WriteTools:
    allowed = frozenset({"write_file"})

    def __init__(self, root: Path) -> None:
        self.root = root

    def call(self, name: str, args: dict[str, Any]) -> Any:
        (self.root / args["path"]).write_text(args["text"])
        return {"written": args["path"]}

    def specs(self) -> list[dict[str, Any]]:
        return []


def main() -> None:
    target = GOLDEN / "approved"
    shutil.rmtree(target, ignore_errors=True)
    work = Path(tempfile.mkdtemp())
    options: dict[str, Any] = {
        "model": golden_desk.PlanningModel(),
        "tools": WriteTools(work),
        "fence": 1,
    }
    given = {"task": "write hello to a.txt"}
    assert (
        execute(
            golden_desk.main, given, journal_dir=target, run_id="golden-approved", **options
        ).code
        == 75
    )
    store = LocalEventStore(target)
    store.append(Event("sig-1", "signal", "keep it short", "lead", "2026-01-01T00:00:00+00:00"))
    store.append(Event("ok-1", "approve", "", "lead", "2026-01-01T00:00:01+00:00"))
    assert execute(golden_desk.main, given, journal_dir=target, **options).code == 0
    store.path.unlink()  # the golden journal is the journal alone
    print(f"recorded {target}")


if __name__ == "__main__":
    main()
