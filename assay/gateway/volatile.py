"""What is volatile in a tool's output: the masks the gateway's matching applies to tool
results, and only to tool results.

A resumed CLI is relaunched and runs its tools again; its requests are matched against the
journal by digest. A tool whose output carries something that changes from run to run (a
run time, a session id, a temporary path, a timestamp) would make every resume diverge, so
each profile declares those parts as patterns (``CliProfile.volatile_output``), a desk adds
its own (``cli.volatile_output``), and the digest is computed with every match masked. What
the CLI sends upstream and what the journal records are never changed; the masks decide
only which recorded call a request equals.

A pattern with groups masks only its groups (``Ran \\d+ tests? in (\\d+\\.\\d+)s``: the time,
not the count); one without masks its whole match. Patterns are compiled ``MULTILINE``
(``^``/``$`` are line ends). A pattern that can match nothing at all (the empty string) is
refused: it would mask nothing and say it masks something.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from assay.errors import BadInput

MASKED = "<volatile>"


@dataclass(frozen=True)
class Mask:
    """One volatile part of tool output: ``pattern``, masked as ``replacement``."""

    pattern: re.Pattern[str]
    replacement: str = MASKED

    @classmethod
    def of(cls, pattern: str, *, where: str, replacement: str = MASKED) -> Mask:
        """``pattern`` compiled; ``BadInput`` naming ``where`` when it is not a usable
        regular expression."""
        if not isinstance(pattern, str) or not pattern:
            raise BadInput(f"{where}: a volatile-output pattern must be a non-empty string")
        try:
            compiled = re.compile(pattern, re.MULTILINE)
        except re.error as exc:
            raise BadInput(f"{where}: {pattern!r} is not a regular expression ({exc})") from None
        if compiled.fullmatch(""):
            raise BadInput(f"{where}: {pattern!r} matches the empty string (it would mask nothing)")
        return cls(compiled, replacement)

    def apply(self, text: str) -> str:
        if self.pattern.groups == 0:
            return self.pattern.sub(self.replacement, text)
        return self.pattern.sub(self._groups_masked, text)

    def _groups_masked(self, match: re.Match[str]) -> str:
        start = match.start()
        out, at = [], start
        for index in range(1, self.pattern.groups + 1):
            begin, end = match.span(index)
            if begin < 0 or begin < at:  # a group that did not take part, or nested
                continue
            out += [match.string[at:begin], self.replacement]
            at = end
        out.append(match.string[at : match.end()])
        return "".join(out)


def masks(patterns: Iterable[str], *, where: str) -> tuple[Mask, ...]:
    """Each of ``patterns`` compiled (``where[i]`` names a bad one)."""
    return tuple(Mask.of(p, where=f"{where}[{i}]") for i, p in enumerate(patterns))


def mask_text(text: str, found: Iterable[Mask]) -> str:
    for one in found:
        text = one.apply(text)
    return text


# Test runners report how long they took: the time changes from run to run while what the
# tool did does not (unittest's "Ran 2 tests in 0.000s", then "0.001s" under load). Every
# CLI runs tests, so these hold for every profile. Masked as "<t>", as they always were, so
# a journal recorded before the masks were declared still matches.
RUNNER_TIMES: tuple[Mask, ...] = (
    Mask.of(r"\bRan \d+ tests? in (\d+(?:\.\d+)?)s\b", where="unittest", replacement="<t>"),
    Mask.of(  # pytest's summary line: "3 passed, 1 warning in 0.12s"
        r"\b\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?)"
        r"\b[^\n]*? in (\d+(?:\.\d+)?)s\b",
        where="pytest",
        replacement="<t>",
    ),
)
# Temporary paths the usual makers mint: Python's tempfile (tmp + 8 of [a-z0-9_]) and
# mktemp(1) (tmp. + 10 letters or digits), anywhere under /tmp or $TMPDIR-like /var/tmp.
TEMP_PATHS: tuple[Mask, ...] = (
    Mask.of(r"(?<![\w.-])/(?:var/)?tmp/(tmp[a-z0-9_]{8}|tmp\.[A-Za-z0-9]{10})\b", where="temp"),
)
