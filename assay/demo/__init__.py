"""``assay demo``: the whole promise of Assay, run for real on an embedded forge in a minute."""

from __future__ import annotations

from assay.demo.stage import DemoOptions, DemoReport, Stage

__all__ = ["DemoOptions", "DemoReport", "Stage"]
