"""The wire formats of the scripted upstream (``assay/demo/upstream_wire.py``)."""

from assay.demo.upstream_wire import anthropic_events, anthropic_message

__all__ = ["anthropic_events", "anthropic_message"]
