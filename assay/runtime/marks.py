"""Per-request markers in a conversation, set aside before its items are content-addressed.

An agent CLI re-sends its whole conversation with every request and marks some items for
the API's prompt cache: Claude Code puts ``cache_control`` on the last content block of
the last message, so the same message is sent marked in one request and unmarked in the
next. Stored as sent, every message would be stored twice and no request's items would be
a prefix of the next one's, so each context node would list every message so far.

``unmark`` removes the marker keys a wire API names (``assay.gateway.wire.MARKERS``) and
returns where they were (``{"path": [item index, key or index, ...], "key", "value"}``);
``remark`` puts them back, so the request a recorded call sent is rebuilt exactly. Only
the containers on the way to a marker are copied; a marker nested deeper than
``MAX_DEPTH`` is left where it is (stored as sent: correct, only not shared).
"""

from __future__ import annotations

from typing import Any

from assay.errors import Corrupt

MAX_DEPTH = 32
Mark = dict[str, Any]


def unmark(items: list[Any], keys: tuple[str, ...]) -> tuple[list[Any], list[Mark]]:
    """``(items without the marker keys, the marks taken out)``; items are not changed."""
    if not keys:
        return items, []
    return unmarked([unmark_item(item, keys) for item in items])


def unmark_item(item: Any, keys: tuple[str, ...]) -> tuple[Any, list[Mark]]:
    """One item without the marker keys, and its marks with paths inside the item (what
    ``unmark`` finds for it wherever it is in the conversation)."""
    marks: list[Mark] = []
    return _strip(item, frozenset(keys), [], marks, 1), marks


def unmarked(found: list[tuple[Any, list[Mark]]]) -> tuple[list[Any], list[Mark]]:
    """``unmark``'s answer from ``unmark_item``'s for each item, in order: each mark's path
    starts with its item's index."""
    marks = [
        {"path": [index, *mark["path"]], "key": mark["key"], "value": mark["value"]}
        for index, (_, inside) in enumerate(found)
        for mark in inside
    ]
    return [plain for plain, _ in found], marks


def _strip(value: Any, keys: frozenset[str], path: list[Any], marks: list[Mark], depth: int) -> Any:
    if depth > MAX_DEPTH:
        return value
    if isinstance(value, dict):
        changed = False
        out: dict[str, Any] = {}
        for key, inner in value.items():
            if key in keys:
                marks.append({"path": list(path), "key": key, "value": inner})
                changed = True
                continue
            new = _strip(inner, keys, [*path, key], marks, depth + 1)
            changed = changed or new is not inner
            out[key] = new
        return out if changed else value
    if isinstance(value, list):
        items = [_strip(inner, keys, [*path, i], marks, depth + 1) for i, inner in enumerate(value)]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    return value


def remark(items: list[Any], marks: Any, *, where: str) -> list[Any]:
    """``items`` with ``marks`` (as ``unmark`` returned them, read from a journal) put back.

    A mark that is not of that shape, or whose path does not lead to an object in
    ``items``, is ``Corrupt`` naming ``where``: a node's marks come from a journal.
    """
    if not isinstance(marks, list):
        raise Corrupt(f"{where}: the context node's marks are not a list", where=where)
    out = list(items)
    for number, mark in enumerate(marks):
        path = mark.get("path") if isinstance(mark, dict) else None
        key = mark.get("key") if isinstance(mark, dict) else None
        if (
            not isinstance(path, list)
            or not path
            or not isinstance(key, str)
            or "value" not in mark
            or not all(type(step) in (int, str) for step in path)
        ):
            raise Corrupt(f"{where}: mark {number} of the context node is malformed", where=where)
        out = _put(out, path, key, mark["value"], where=f"{where}: mark {number}")
    return out


def _put(container: Any, path: list[Any], key: str, value: Any, *, where: str) -> Any:
    """A copy of ``container`` with ``key: value`` set in the object at ``path``."""
    if not path:
        if not isinstance(container, dict):
            raise Corrupt(f"{where}: its path does not lead to an object", where=where)
        return {**container, key: value}
    step, rest = path[0], path[1:]
    if isinstance(container, list) and type(step) is int and 0 <= step < len(container):
        copy = list(container)
        copy[step] = _put(container[step], rest, key, value, where=where)
        return copy
    if isinstance(container, dict) and type(step) is str and step in container:
        return {**container, step: _put(container[step], rest, key, value, where=where)}
    raise Corrupt(f"{where}: its path does not lead to an object", where=where)
