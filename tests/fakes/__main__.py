"""Run a fake model server as a process: ``python -m tests.fakes openai|anthropic SCRIPT``.

Prints the ``base_url`` for the adapter's config on its first stdout line, then serves
until killed, printing ``count=<n>`` to stderr each time a completion is answered (so a
parent can follow progress without polling HTTP).
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.fakes import FakeAnthropicServer, FakeModelServer, FakeOpenAIServer


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    kinds: dict[str, type[FakeModelServer]] = {
        "openai": FakeOpenAIServer,
        "anthropic": FakeAnthropicServer,
    }
    if len(args) != 2 or args[0] not in kinds:
        sys.exit("usage: python -m tests.fakes openai|anthropic SCRIPT.yaml")
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
