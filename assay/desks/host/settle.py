"""How a run's stop settles its claim and its review: one named outcome per exit code.

The desk loop reads a run's exit code once, here, and from then on speaks of what it
means for the claim (done, waiting, released, requeued, given up) and for the review
(ready, closed, draft), instead of testing numbers in several places.
"""

from __future__ import annotations

import enum

from assay.errors import Denied, Failed, Paused, Suspended, Unavailable


class Settle(enum.Enum):
    """What a run's stop does to its claim."""

    DONE = "done"  # finished (done, failed or denied): the claim is released as done
    WAITING = "waiting"  # a durable wait (budget, approval, objective, an event)
    RELEASE = "release"  # the forge or a service was unavailable: released for anyone
    REQUEUE = "requeue"  # an objective's next run: released, back in the queue
    GIVE_UP = "give-up"  # anything else: released with a note, not retaken by this process

    @property
    def finished(self) -> bool:
        """The run reached its end: its review is ready or closed, not a draft."""
        return self is Settle.DONE


_BY_CODE = {
    0: Settle.DONE,
    Failed.code: Settle.DONE,
    Denied.code: Settle.DONE,
    Paused.code: Settle.WAITING,
    Suspended.code: Settle.WAITING,
    Unavailable.code: Settle.RELEASE,
}


def settle_for(code: int, *, requeued: bool = False) -> Settle:
    """The outcome of a run that exited ``code`` (``requeued``: an objective's next run)."""
    if requeued:
        return Settle.REQUEUE
    return _BY_CODE.get(code, Settle.GIVE_UP)


def review_state(code: int, status: str) -> str:
    """The review's state after a run: ``ready`` when it finished done, ``closed`` when it
    finished otherwise (failed, denied, or done with a failed outcome), else ``draft``."""
    if code == 0 and status == "done":
        return "ready"
    return "closed" if settle_for(code).finished else "draft"
