"""The one error tree of Assay, and the exit codes of the CLI and the desk runner.

Every failure that reaches a user is an ``AssayError`` subclass whose ``code`` is the
process exit code and whose ``status`` is the word ``--json`` output carries::

    AssayError (70 internal)
    ├── Failed (1)                 finished and failed: a verify row failed, a desk gave up
    │   ├── StepError              a step's body raised (assay.runtime.types)
    │   ├── MergeRefused           the merge rule refused (assay.evidence.gate)
    │   └── GitHubRefused          GitHub refused a write (assay.github.rest)
    │       └── BatchRefused       one mutation of a GraphQL request refused; what the
    │                              others did rides with it (assay.github.api)
    ├── UsageError (2)             bad command line
    ├── Busy (3)                   nothing claimable, or the claim is held by another holder
    ├── Fenced (4)                 this holder lost its claim to a newer one; nothing written
    ├── Diverged (5)               the code no longer matches the journal
    ├── Corrupt (6)                a journal, claim or record failed its integrity check
    ├── Paused (7)                 a budget is exhausted; resumable once raised
    ├── BadInput (65)              malformed brief, manifest, config, event or flag
    │   ├── JournalVersionError    a journal written by a newer Assay (assay.journal.reader)
    │   ├── StepOutputError        a step's output fails its declared shape (runtime.types)
    │   ├── ToolError              malformed tool arguments, for the model (assay.desks.kinds.tools)
    │   └── GitHubNotFound         no such GitHub resource (assay.github.rest)
    ├── Unavailable (69)           forge or model unreachable after retries; nothing lost
    │   ├── ForgeUnavailable (69)
    │   │   ├── TransportError     git could not reach the forge (assay.plumbing)
    │   │   ├── PushThrottled      the forge refused a push over its push rate, HTTP 429
    │   │   │                      (assay.plumbing; a push ledger sends it again)
    │   │   ├── Unreachable        an in-process ref read could not connect (assay.forge.lsrefs)
    │   │   └── WriteUncertain     a create GitHub may have made, not sent twice (assay.github.rest)
    │   └── NoSpace                a local disk (forge cache, work tree) is full (assay.plumbing)
    ├── Internal (70)              a bug
    │   └── GitError               git refused in a way Assay did not expect (assay.plumbing)
    ├── Suspended (75)             waiting for an event, timer or approval
    ├── Denied (77)                an undeclared tool or effect, or an actor without permission
    │   └── GitHubDenied           the token may not do that (assay.github.rest)
    └── SandboxUnavailable (78)    bubblewrap is missing or cannot create namespaces here

Outside the tree, on purpose (never reaching a user)::

    Suspension                     a run waits (BaseException; becomes Suspended, 75)
    EndOfHistory                   replay asked past the journal's end (assay.runtime.run)
    ObjectMissing                  an object not in the repository (assay.odb; LookupError,
                                   turned into GitError at assay.plumbing's boundary)
    NeedsGit                       a push only ``git push`` can make (assay.forge.sendpack;
                                   Forge.push then runs git: nothing was changed)
    TooLarge                       a pack of more objects than assay.forge.packfile reads
                                   (the fetch then runs git)
    WardGone                       a run's warden died under a call (assay.sandbox.ward;
                                   the call reads as killed, exit 9)
    StateRefused                   a CLI's session files or resume point not as the desk
                                   records them (assay.agentcli.sessionstate; the desk
                                   warns and relaunches the CLI instead)
    DatabaseRefused                a CLI's session database that will not hold still or
                                   keeps a secret (assay.agentcli.sessiondb; the desk
                                   warns and keeps the resume point before)

``Suspension`` and ``EndOfHistory`` derive from ``BaseException`` so that desk code's
``except Exception`` cannot swallow them by accident. The runtime turns a suspension into
``Suspended`` (exit 75) at the process boundary.
"""

from __future__ import annotations

from typing import Any, ClassVar


class AssayError(Exception):
    """Base of every error Assay reports; carries a stable exit code and status word."""

    code: ClassVar[int] = 70
    status: ClassVar[str] = "internal"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_json(self) -> dict[str, Any]:
        """The ``{"status", "code", "message"}`` object that ``--json`` prints."""
        payload: dict[str, Any] = {
            "status": self.status,
            "code": self.code,
            "message": self.message,
        }
        if self.details:
            payload["details"] = self.details
        return payload


class Failed(AssayError):
    code = 1
    status = "failed"


class UsageError(AssayError):
    code = 2
    status = "usage"


class Busy(AssayError):
    code = 3
    status = "busy"


class Fenced(AssayError):
    code = 4
    status = "fenced"


class Diverged(AssayError):
    code = 5
    status = "diverged"


class Corrupt(AssayError):
    code = 6
    status = "corrupt"


class Paused(AssayError):
    code = 7
    status = "paused"


class BadInput(AssayError):
    code = 65
    status = "bad_input"


class Unavailable(AssayError):
    code = 69
    status = "unavailable"


class ForgeUnavailable(Unavailable):
    """The forge (a git remote or the GitHub API) could not be reached after retries."""


class Internal(AssayError):
    code = 70
    status = "internal"


class Suspended(AssayError):
    code = 75
    status = "suspended"


class Denied(AssayError):
    code = 77
    status = "denied"


class SandboxUnavailable(AssayError):
    """Agent or branch code cannot be confined on this machine (EX_CONFIG, 78).

    The message says how to fix it: install bubblewrap, allow unprivileged user namespaces
    (Ubuntu's AppArmor setting), or declare ``sandbox: {network: host, isolation: off}``.
    """

    code = 78
    status = "sandbox_unavailable"


class Suspension(BaseException):
    """Raised inside a run to unwind to the process boundary while it waits.

    A ``BaseException`` so that ``except Exception`` in desk code does not swallow it.
    """

    def __init__(self, waiting_for: str, *, until: str | None = None) -> None:
        super().__init__(waiting_for)
        self.waiting_for = waiting_for
        self.until = until


EXIT_CODES: dict[str, int] = {
    "ok": 0,
    "failed": Failed.code,
    "usage": UsageError.code,
    "busy": Busy.code,
    "fenced": Fenced.code,
    "diverged": Diverged.code,
    "corrupt": Corrupt.code,
    "paused": Paused.code,
    "bad_input": BadInput.code,
    "unavailable": Unavailable.code,
    "internal": Internal.code,
    "suspended": Suspended.code,
    "denied": Denied.code,
    "sandbox_unavailable": SandboxUnavailable.code,
}
