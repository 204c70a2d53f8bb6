"""Native resume: an agent CLI relaunched on its own session state instead of replayed.

A CLI whose profile declares ``resume`` (a ``NativeResume``) keeps its conversation in
session files under its private HOME (Claude Code's transcript, Codex's rollout, the
Gemini CLI's chat). The desk records those files with each checkpoint
(``assay.agentcli.sessionstate``), and a resumed run restores them with the work tree and
relaunches the CLI with its own resume option: no tool runs again, and the one call the
journal holds past that point is answered from it.

A CLI resumed this way needs a prompt, and marks the resume in its conversation: each
resumed launch is given ``RESUME_PROMPT`` as its prompt (and, where the CLI takes one, as
the text it adds to an interrupted turn), and may add a turn of its own before it
(``fillers``: Claude Code's "No response requested."). None of that was in the
conversation of the run that was killed, so the gateway takes it out of every request of
a resumed session (``without_resume``) before the request is matched, recorded or sent
upstream: the model sees the conversation the uncrashed CLI would have sent.

A profile declares it in a few lines::

    NativeResume(
        files=(".qwen/projects/*/chats/*.jsonl",),  # the session state, under HOME
        again=("--resume={session}",),  # put before the prompt on a resumed launch
    )
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

# What a resumed CLI is given as its prompt: text no brief or model writes by chance, and
# that says what happened to anyone who reads a session file.
RESUME_PROMPT = "[assay: this session resumes from its last checkpoint]"
SESSION = "{session}"  # the session's id in ``first`` and ``again``
PROMPT = "{prompt}"


@dataclass(frozen=True)
class NativeResume:
    """How one CLI resumes its own session (see the module docstring).

    ``files``: globs, relative to the CLI's HOME, of its session state (``*`` within a
    folder, ``**`` across folders); only these files are recorded, never the CLI's
    configuration or credentials. ``again``: the arguments of a resumed launch, put right
    before the prompt (before its ``--``, or the option it is the value of: ``-p``);
    ``{session}`` is the session's id. ``first``:
    arguments of a first launch (a CLI that lets the desk name its session up front).
    ``result``: how the session files spell a recorded tool result, ``{id}`` its call's id
    (a CLI that writes its session behind its requests is waited for until each result
    of a request is recorded); empty when the files are written before the request.
    ``fillers``: the text of a turn the CLI adds before the resume prompt. ``env``:
    variables of a resumed launch (``{prompt}``: the resume prompt). ``databases``: which
    of ``files`` are SQLite databases the CLI writes while it runs (recorded as a
    consistent copy, its write-ahead log applied, redacted through SQL:
    ``assay.agentcli.sessiondb``)."""

    files: tuple[str, ...]
    again: tuple[str, ...]
    first: tuple[str, ...] = ()
    result: str = ""
    fillers: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    databases: tuple[str, ...] = ()

    @property
    def named(self) -> bool:
        """Whether the desk names the session (``{session}`` in the arguments)."""
        return any(SESSION in arg for arg in (*self.first, *self.again))

    def arguments(self, base: Sequence[str], *, session: str, resumed: bool) -> list[str]:
        """``base`` (a command holding ``{prompt}``) with this launch's arguments before
        the prompt, ``{session}`` filled."""
        extra = [arg.replace(SESSION, session) for arg in (self.again if resumed else self.first)]
        if not extra:
            return list(base)
        where = next((i for i, arg in enumerate(base) if PROMPT in arg), len(base))
        if where > 1 and base[where - 1].startswith("-"):
            where -= 1  # the prompt's ``--``, or the option the prompt is the value of
        return [*base[:where], *extra, *base[where:]]

    def environment(self) -> dict[str, str]:
        """The variables of a resumed launch."""
        return {name: value.replace(PROMPT, RESUME_PROMPT) for name, value in self.env.items()}

    def recorded(self, call_id: str) -> bytes:
        """What a session file holds once the result of tool call ``call_id`` is in it."""
        return self.result.replace("{id}", call_id).encode("utf-8")


def without_resume(
    items: list[Any], *, fillers: Sequence[str], markers: Sequence[str]
) -> list[Any]:
    """A resumed session's conversation as the CLI would have sent it had it never stopped.

    Every text part (or string content) that is the resume prompt is taken out, and with it
    what the CLI attached to the prompt's own turn (an item holding no tool result); an item
    left with nothing is dropped, and so is a turn just before a dropped one whose text is
    one of ``fillers``. A per-request marker (``markers``: ``cache_control``) that was on
    a part taken out moves to the part before it, where the CLI would have put it. Items
    are never changed in place."""
    kept: list[Any] = []
    for item in items:
        if not isinstance(item, dict):
            kept.append(item)
            continue
        key = "parts" if isinstance(item.get("parts"), list) else "content"
        content = item.get(key)
        if isinstance(content, str) and content.strip() == RESUME_PROMPT:
            _drop_filler(kept, fillers)
            continue
        if not isinstance(content, list) or not any(
            isinstance(p, dict) and _is_prompt(p) for p in content
        ):
            kept.append(item)
            continue
        # The prompt ends a turn of its own (with what the CLI attached to it: a note of a
        # file changed since, a reminder), or was added to the tool results it follows.
        added = not any(isinstance(p, dict) and _is_result(p) for p in content)
        parts: list[Any] = []
        moved: dict[str, Any] = {}
        for part in content:
            if isinstance(part, dict) and (_is_prompt(part) or added):
                moved.update({m: part[m] for m in markers if m in part})
                continue
            parts.append(part)
        if parts:
            kept.append({**item, key: parts})
        else:
            _drop_filler(kept, fillers)
        if moved:
            _mark_last(kept, moved)
    return kept


def _is_result(part: dict[str, Any]) -> bool:
    """A tool's result (Anthropic, Responses, Gemini), which a resume never adds."""
    return part.get("type") in ("tool_result", "function_call_output") or (
        "functionResponse" in part
    )


def _is_prompt(part: dict[str, Any]) -> bool:
    text = part.get("text")
    return isinstance(text, str) and text.strip() == RESUME_PROMPT


def _drop_filler(kept: list[Any], fillers: Sequence[str]) -> None:
    """Drop the last kept item when it is a filler turn (only ``fillers`` text)."""
    if not kept or not fillers:
        return
    last = kept[-1]
    if not isinstance(last, dict) or last.get("role") == "user":
        return
    key = "parts" if isinstance(last.get("parts"), list) else "content"
    content = last.get(key)
    texts = (
        [content]
        if isinstance(content, str)
        else [p.get("text") if isinstance(p, dict) else None for p in content or []]
    )
    if texts and all(isinstance(t, str) and t.strip() in fillers for t in texts):
        kept.pop()


def _mark_last(kept: list[Any], marks: dict[str, Any]) -> None:
    """Put ``marks`` on the last part of the last kept item that has parts (a copy of it:
    the caller's request is never changed)."""
    for index in range(len(kept) - 1, -1, -1):
        item = kept[index]
        if not isinstance(item, dict):
            continue
        key = "parts" if isinstance(item.get("parts"), list) else "content"
        content = item.get(key)
        if isinstance(content, list) and content and isinstance(content[-1], dict):
            last = {**content[-1], **{m: v for m, v in marks.items() if m not in content[-1]}}
            kept[index] = {**item, key: [*content[:-1], last]}
            return
