"""What a sandboxed process may reach: the manifest's ``sandbox:`` section as a value.

``network`` is declared in advance: ``none`` (loopback of its own, nothing else),
``gateway`` (only the supervisor's model gateway, relayed from ``127.0.0.1:<port>`` inside
to a Unix socket the supervisor binds) or ``host`` (the machine's network). ``isolation:
off`` runs without bubblewrap at all. Either ``host`` or ``off`` makes the run
*unsandboxed*, which the journal's start entry and the board record.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from assay.errors import BadInput

Network = Literal["none", "gateway", "host"]
Isolation = Literal["on", "off"]
NETWORKS: tuple[str, ...] = ("none", "gateway", "host")
ISOLATIONS: tuple[str, ...] = ("on", "off")
TOOLCHAINS: tuple[str, ...] = ("python", "node")


@dataclass(frozen=True)
class SandboxSpec:
    """How one process is confined (see the module docstring)."""

    network: Network = "none"
    isolation: Isolation = "on"
    read_only: tuple[Path, ...] = ()
    toolchains: tuple[str, ...] = ("python",)
    writable: tuple[Path, ...] = ()  # folders besides the work tree (the gate's reports)
    # A folder of the supervisor's mounted as the sandbox's HOME (an agent CLI's, whose
    # session files the desk records); None: HOME is a fresh folder of the private /tmp.
    home: Path | None = None

    def __post_init__(self) -> None:
        if self.network not in NETWORKS:
            raise BadInput(f"sandbox.network: must be one of {', '.join(NETWORKS)}")
        if self.isolation not in ISOLATIONS:
            raise BadInput(f"sandbox.isolation: must be one of {', '.join(ISOLATIONS)}")
        for name in self.toolchains:
            if name not in TOOLCHAINS:
                raise BadInput(f"sandbox.toolchains: unknown toolchain {name!r}")

    @property
    def sandboxed(self) -> bool:
        """False when the run can see the host (network host or isolation off)."""
        return self.isolation == "on" and self.network != "host"

    def with_read_only(self, *paths: Path) -> SandboxSpec:
        """The same spec with more read-only paths (a brief file, a prompt file)."""
        return replace(self, read_only=(*self.read_only, *paths))

    def with_writable(self, *paths: Path) -> SandboxSpec:
        """The same spec with more writable folders (the gate's report folder)."""
        return replace(self, writable=(*self.writable, *paths))

    def with_home(self, home: Path) -> SandboxSpec:
        """The same spec with ``home`` (a folder of the supervisor's) as the sandbox's HOME."""
        return replace(self, home=home)

    def to_json(self) -> dict[str, Any]:
        """What the journal's start entry records."""
        return {
            "network": self.network,
            "isolation": self.isolation,
            "read_only": [str(p) for p in self.read_only],
            "toolchains": list(self.toolchains),
            "sandboxed": self.sandboxed,
            **({"writable": [str(p) for p in self.writable]} if self.writable else {}),
        }


@dataclass(frozen=True)
class GatewayEndpoint:
    """The supervisor's gateway: inside the sandbox ``127.0.0.1:<port>`` reaches the socket."""

    socket_path: Path
    port: int = field(default=8080)

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise BadInput(f"gateway port {self.port} is not a TCP port")
