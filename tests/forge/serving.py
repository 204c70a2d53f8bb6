"""A plain HTTP request to a :class:`~assay.forge.ForgeServer`, for the serve tests."""

from __future__ import annotations

import http.client

from assay.forge import ForgeServer


def request(
    server: ForgeServer, method: str, path: str, body: bytes | None = None, **headers: str
) -> tuple[int, bytes]:
    """``(status, body)`` of one request to ``path`` (which starts with ``/``)."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()
