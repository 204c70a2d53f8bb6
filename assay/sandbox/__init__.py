"""The sandbox: where agent-chosen and branch-chosen code runs, holding no credential.

``run_sandboxed`` / ``start_sandboxed`` (``assay.sandbox.process``) are the one process
runner for the agent's ``run`` tool, command desks, agent CLIs, objective judges and the
gate's rows; ``SandboxSpec`` is the manifest's ``sandbox:`` section; ``sandbox_environment``
builds their environment from scratch; ``assay.sandbox.scan`` checks every checkpoint for
secrets. See docs/sandbox.md.
"""

from assay.sandbox.bwrap import require_sandbox, sandbox_available
from assay.sandbox.environ import BASE_ENV, sandbox_environment
from assay.sandbox.process import ProcessResult, SandboxProcess, run_sandboxed, start_sandboxed
from assay.sandbox.spec import GatewayEndpoint, SandboxSpec

__all__ = [
    "BASE_ENV",
    "GatewayEndpoint",
    "ProcessResult",
    "SandboxProcess",
    "SandboxSpec",
    "require_sandbox",
    "run_sandboxed",
    "sandbox_available",
    "sandbox_environment",
    "start_sandboxed",
]
