"""What the work done on each item of a conversation found, remembered for the recent
conversations: a ``WireSession``'s own (``WireSession.memo``), so one run's, never shared.

An agent CLI sends its whole conversation again with every request, so each model call's
work on its items (the markers set aside and the blob refs, ``assay.runtime.wire``; the
matching normalisation and the tool calls paired, ``assay.gateway.calls``) would grow with
the conversation. ``ConversationMemo`` remembers, for the last conversations it saw, what
each kind of work found for each item; a request that begins with items of one of those
reuses what was found for them and computes only for the rest: its new items, and the
last one before them when the CLI moved its prompt-cache marker off it (docs/benchmarks.md,
"Model gateway").

A conversation is known by its exact text (``json.dumps`` of its items, keys in the order
they came), and a request shares an item with a remembered conversation only when its
text is the same up to the end of that item (and the next item's comma, or the closing
bracket, follows): items are JSON values, each one's text ends where the same text does,
so the request's first items are then exactly the remembered ones, byte for byte. Never by
position alone or by ``==`` (which takes ``1`` for ``true``): an item changed in place,
however slightly, ends what is shared there, and everything from it on is computed afresh.
A kind's work must depend on nothing but the item (and what the kind's name fixes: the API,
the marker keys, the masks); its results are shared between requests, so callers only
read them.

Bounded: at most ``KEPT`` conversations, and their texts at most ``budget`` characters (the
oldest forgotten first); ``budget=0`` remembers nothing, so every request computes for
every item (what the benchmark measures the memo against).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

BUDGET_CHARS = 8 * 1024 * 1024  # of JSON text; a long agent session's conversation is ~1 MB
KEPT = 8  # conversations: the main one's last requests and a CLI's side requests
# ``json.dumps``, without its check for a value holding itself (a request's body is parsed
# JSON, which never does; one that did would recurse until Python stops it)
_ENCODE = json.JSONEncoder(check_circular=False).encode

T = TypeVar("T")


class Conversation:
    """One request's items, their text and where each item's text ends in it, and what
    each kind of work found for each item; ``before``: what was found for the items it
    shares with a remembered conversation."""

    def __init__(
        self, items: list[Any], text: str, ends: list[int], before: dict[Hashable, list[Any]]
    ) -> None:
        self.items = items
        self.text = text
        self.ends = ends
        self.before = before
        self.found: dict[Hashable, list[Any]] = {}

    def shared_with(self, text: str) -> int:
        """How many of this conversation's first items ``text`` (another conversation's)
        begins with, byte for byte: the most whose text is the same up to the end of
        the last of them, followed by the next item's comma or the closing bracket (so
        a number there ends there too)."""
        low, high = 0, len(self.ends)
        while low < high:  # a prefix of a shared beginning is shared: bisect
            middle = (low + high + 1) // 2
            end = self.ends[middle - 1]
            if text[end : end + 1] in (",", "]") and text[:end] == self.text[:end]:
                low = middle
            else:
                high = middle - 1
        return low

    def each(
        self,
        kind: Hashable,
        work: Callable[[Any], T],
        *,
        over: list[Any] | None = None,
        remember: bool = True,
    ) -> list[T]:
        """``[work(item) for item in over]`` (``over``: the items, or a value made of each,
        in order), computed only for the items past the shared beginning when ``kind`` was
        found for it; kept for the conversations that share this one's beginning unless
        ``remember`` is False (a value that holds only for this request)."""
        known = self.found.get(kind)
        if known is not None:
            return known
        values = self.items if over is None else over
        shared = self.before.get(kind, [])
        found = shared + [work(value) for value in values[len(shared) :]]
        if remember:
            self.found[kind] = found
        return found


class ConversationMemo:
    """The recent conversations (module docstring)."""

    def __init__(self, budget: int = BUDGET_CHARS) -> None:
        self.budget = budget
        self.recent: list[Conversation] = []  # oldest first
        self.size = 0  # characters of their texts

    def conversation(self, items: list[Any]) -> Conversation:
        """``items`` as a ``Conversation`` sharing what was found for the items it begins
        with of the remembered conversation it shares the most with; remembered itself."""
        if self.budget <= 0:
            return Conversation(items, "", [], {})  # nothing remembered, nothing to read
        text = _ENCODE(items)
        base: Conversation | None = None
        shared = 0
        for known in self.recent:
            count = known.shared_with(text)
            if count > shared:
                base, shared = known, count
        ends = base.ends[:shared] if base is not None else []
        at = ends[-1] if ends else 0
        for item in items[shared:]:  # "[" or ", " before each item
            at += 1 if at == 0 else 2
            at += len(_ENCODE(item))
            ends.append(at)
        if (ends[-1] if ends else 1) + 1 != len(text):
            # Not the list's own text (an item whose encoding depends on its place):
            # nothing is shared or remembered, every item is worked on.
            return Conversation(items, text, [], {})
        before = {}
        if base is not None:
            before = {kind: found[:shared] for kind, found in base.found.items()}
        conversation = Conversation(items, text, ends, before)
        self._remember(conversation)
        return conversation

    def _remember(self, conversation: Conversation) -> None:
        if len(conversation.text) > self.budget:
            return  # more than the memo may hold: computed for every item every time
        self.recent.append(conversation)
        self.size += len(conversation.text)
        while len(self.recent) > KEPT or self.size > self.budget:
            self.size -= len(self.recent.pop(0).text)


__all__ = ["BUDGET_CHARS", "KEPT", "Conversation", "ConversationMemo"]
