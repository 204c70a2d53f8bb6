"""Hold one push inside the forge's ``receive-pack`` at a chosen hook, on a real condition.

``HeldPush.install(forge, stage=...)`` writes a hook into the bare repository that lets
every push through except one: the ``nth`` push, after the test calls ``arm(nth)``, that
moves a brief branch (``refs/heads/assay/*``) and moves no claim (a step's durability
point, which asserts its claim where it is), or whichever refs ``install`` was told to
match.
That push stops inside the hook: the hook writes the ref lines it was given to ``held``
and blocks reading a FIFO until the test calls ``release()`` (or kills it).
The stages are git's own:

- ``pre-receive``: the pack is received, no ref has moved;
- ``reference-transaction`` (state ``prepared``): every ref of the push is locked
  (``<ref>.lock`` written), none moved;
- ``post-receive``: every ref has moved; the pusher has not heard the report yet.

Nothing is timed: the test waits for ``held`` to appear, and the hook waits for the FIFO.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from tests.forge_fixtures import wait_until

STAGES = ("pre-receive", "reference-transaction", "post-receive")

_HOOK = """#!/bin/sh
# Holds one armed push (tests.torture.held_push).
{state_check}input=$(cat)
case "$input" in *" {match}"*) ;; *) exit 0 ;; esac
{unless_check}n=$(cat "{control}/arm" 2>/dev/null) || exit 0
if [ "$n" -gt 1 ]; then echo $((n - 1)) > "{control}/arm"; exit 0; fi
mv "{control}/arm" "{control}/taken" 2>/dev/null || exit 0
# Open the gate (read-write: no wait) before saying so: a release cannot come too soon.
exec 3<>"{control}/gate"
printf '%s\\n' "$input" > "{control}/held.tmp"
echo $$ >> "{control}/held.tmp"
mv "{control}/held.tmp" "{control}/held"
read -r _ <&3
exit 0
"""


@dataclass(frozen=True)
class Held:
    """What the held push carried: ``{ref: (old, new)}``, and the hook's process id."""

    refs: dict[str, tuple[str, str]]
    hook_pid: int


@dataclass(frozen=True)
class HeldPush:
    control: Path
    stage: str

    @classmethod
    def install(
        cls,
        forge_path: Path,
        *,
        stage: str,
        match: str = "refs/heads/assay/",
        unless: str | None = "refs/assay/claims/",
    ) -> HeldPush:
        """The hook at ``stage``, holding a push that moves a ref starting with ``match``
        and moves none starting with ``unless`` (the defaults: a step's push, not a
        claim's)."""
        assert stage in STAGES, stage
        control = forge_path.parent / f"held-{stage}"
        control.mkdir()
        os.mkfifo(control / "gate")
        state_check = '[ "$1" = prepared ] || exit 0\n' if stage == "reference-transaction" else ""
        hook = forge_path / "hooks" / stage
        # A ref of ``unless`` that moves lets the push through; one asserted where it is (a
        # step's push carries its claim so: assay.forge.group) does not.
        unless_check = (
            f'printf \'%s\\n\' "$input" | while read -r old new ref; do case "$ref" in '
            f'{unless}*) [ "$old" = "$new" ] || exit 1 ;; esac; done || exit 0\n'
            if unless
            else ""
        )
        text = _HOOK.format(
            control=control, state_check=state_check, match=match, unless_check=unless_check
        )
        hook.write_text(text, encoding="utf-8")
        hook.chmod(0o755)
        return cls(control, stage)

    def arm(self, nth: int = 1) -> None:
        """Hold the ``nth`` matching push from now (the ones before it pass)."""
        (self.control / "arm").write_text(f"{nth}\n", encoding="ascii")

    def wait_held(self, *, timeout: float = 120) -> Held:
        """Block until a push is inside the hook; what it carries."""
        held = self.control / "held"
        wait_until(held.exists, timeout=timeout, what=f"a push held in {self.stage}")
        *lines, pid = held.read_text(encoding="utf-8").split()
        refs = {}
        for old, new, ref in zip(lines[0::3], lines[1::3], lines[2::3], strict=True):
            refs[ref] = (old, new)
        return Held(refs, int(pid))

    def release(self) -> None:
        """Let the held hook return (it exits 0: the push goes on)."""
        with contextlib.suppress(OSError):  # ENXIO: no hook holds it open (killed, or none)
            fd = os.open(self.control / "gate", os.O_WRONLY | os.O_NONBLOCK)
            try:
                os.write(fd, b"go\n")
            finally:
                os.close(fd)


def read_ref(forge_path: Path, ref: str) -> str | None:
    """The ref as the bare repository holds it now (loose file, else packed-refs)."""
    loose = forge_path / ref
    if loose.is_file():
        return loose.read_text(encoding="ascii").strip()
    packed = forge_path / "packed-refs"
    if packed.is_file():
        for line in packed.read_text(encoding="ascii").splitlines():
            if line.endswith(" " + ref):
                return line.split()[0]
    return None
