"""The scripted three-API upstream the real-CLI tests drive; it ships with Assay for
``assay demo --cli`` (``assay/demo/upstream.py``), so the tests use that one."""

from assay.demo.upstream import Seen, WireFake, assistant_turns, default_side, toolless_side

__all__ = ["Seen", "WireFake", "assistant_turns", "default_side", "toolless_side"]
