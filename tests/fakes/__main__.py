"""Run a fake model server as a process: ``python -m tests.fakes openai|anthropic|wire SCRIPT``.

Prints the ``base_url`` for the adapter's config on its first stdout line (for ``wire``, the
three-API ``WireFake``: its root URL; OpenAI clients add ``/v1``), then serves
until killed, printing ``count=<n>`` to stderr each time a completion is answered (so a
parent can follow progress without polling HTTP).
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.fakes import FakeAnthropicServer, FakeModelServer, FakeOpenAIServer
from tests.fakes.wire import WireFake


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    kinds: dict[str, type[FakeModelServer] | type[WireFake]] = {
        "openai": FakeOpenAIServer,
        "anthropic": FakeAnthropicServer,
        "wire": WireFake,
    }
    if len(args) != 2 or args[0] not in kinds:
        sys.exit("usage: python -m tests.fakes openai|anthropic|wire SCRIPT.yaml")
    server = kinds[args[0]].from_script(Path(args[1]))
    server.start()
    print(getattr(server, "base_url", server.url), flush=True)
    seen = 0
    try:
        while True:
            server.wait_for_count(seen + 1, timeout=24 * 3600)
            seen = server.count
            print(f"count={seen}", file=sys.stderr, flush=True)
    except (KeyboardInterrupt, TimeoutError):
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
