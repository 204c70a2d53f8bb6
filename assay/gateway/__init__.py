"""The model gateway: a loopback server that journals every model call an agent CLI makes.

``server`` (the HTTP side: ``Gateway``), ``wire`` (what it reads of the three wire APIs),
``upstream`` (the desk's ``model:`` as an HTTP client), ``calls`` (a request to a journaled
call: ``CallHandler``), ``mcp`` (the desk's tools over MCP). The matching and journaling of
calls on a ``Run`` is ``assay.runtime.wire.WireSession``; the desk kind is
``assay.desks.kinds.cli``. See docs/agent-clis.md.
"""
