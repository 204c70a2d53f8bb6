"""YAML documents whose errors name a file, a line and a field.

Briefs, issue bodies, desk manifests and sweep policies are YAML written by people (or by
anyone who may edit an issue). ``load_yaml`` is the one loader for all of them: it loads a
document safely (no tags, no anchors or aliases, no duplicate keys, bounded size and nesting
depth, every failure a ``BadInput`` naming the source), keeps the node
tree so that any field can be traced back to its line, and turns a pydantic
``ValidationError`` into one ``BadInput`` of the form
``briefs/x.md line 4: verify[0].run: field required``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import ValidationError

from assay.errors import BadInput

MAX_DOCUMENT_BYTES = 256 * 1024
# No brief, manifest or policy nests anywhere near this deep; a deeper document is hostile
# (a thousand brackets are 2 KB and overflow a recursive constructor).
MAX_DEPTH = 64

# libyaml's parser when PyYAML was built with it (much faster), the pure one otherwise; both
# with the safe constructor (no tags that build Python objects).
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class YamlDoc:
    """A loaded YAML document plus what is needed to name lines in errors."""

    data: Any
    node: yaml.Node | None
    source: str
    line_offset: int

    def line_of(self, loc: Sequence[str | int]) -> int:
        """The 1-based file line of the field at ``loc`` (or of its nearest parent)."""
        return self.locate(loc)[0]

    def locate(self, loc: Sequence[str | int]) -> tuple[int, str]:
        """Return (file line, display path) for a pydantic ``loc``.

        Elements that do not match the document (a union's tag, say) are skipped; the
        last element is kept even when absent, because it names a missing field.
        """
        node = self.node
        line = (node.start_mark.line if node is not None else 0) + 1 + self.line_offset
        parts: list[str | int] = []
        for index, element in enumerate(loc):
            child = _child(node, element)
            if child is None:
                if index == len(loc) - 1:
                    parts.append(element)
                continue
            key_node, node = child
            line = key_node.start_mark.line + 1 + self.line_offset
            parts.append(element)
        return line, format_path(parts)

    def bad(self, loc: Sequence[str | int], message: str) -> BadInput:
        """A ``BadInput`` naming this document's file, the line of ``loc`` and its path."""
        line, path = self.locate(loc)
        where = f"{path}: " if path else ""
        return BadInput(f"{self.source} line {line}: {where}{message}", source=self.source)


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def format_path(parts: Sequence[str | int]) -> str:
    """``("verify", 0, "run")`` -> ``verify[0].run``.

    A key that is not a plain field name is shown as ``<key>``: an error message never
    quotes a file's contents beyond its own format (a "key" may be any line of any file).
    """
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            name = part if _PLAIN_KEY.fullmatch(part) else "<key>"
            text += f".{name}" if text else name
    return text


def _child(node: yaml.Node | None, element: str | int) -> tuple[yaml.Node, yaml.Node] | None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == str(element):
                return key_node, value_node
        return None
    if (
        isinstance(node, yaml.SequenceNode)
        and isinstance(element, int)
        and 0 <= element < len(node.value)
    ):
        item: yaml.Node = node.value[element]
        return item, item
    return None


def load_yaml(text: str, *, source: str, line_offset: int = 0) -> YamlDoc:
    """Parse one YAML document safely; every failure is a ``BadInput`` naming ``source``.

    ``line_offset`` is the number of file lines before ``text`` (the ``---`` of a brief),
    so that reported lines are lines of the file, not of the snippet.
    """
    if len(text.encode("utf-8", "surrogatepass")) > MAX_DOCUMENT_BYTES:
        raise BadInput(f"{source}: over {MAX_DOCUMENT_BYTES} bytes of YAML", source=source)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            _check_nodes(node, text, source=source, line_offset=line_offset)
            data = loader.construct_document(node)
        else:
            data = None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = (mark.line + 1 + line_offset) if mark is not None else 1 + line_offset
        problem = exc.problem or exc.context or "invalid YAML"
        raise BadInput(f"{source} line {line}: invalid YAML: {problem}", source=source) from exc
    except yaml.YAMLError as exc:
        raise BadInput(f"{source}: invalid YAML: {exc}", source=source) from exc
    except RecursionError as exc:
        raise BadInput(
            f"{source}: YAML nested deeper than {MAX_DEPTH} levels", source=source
        ) from exc
    except (ValueError, TypeError, OverflowError) as exc:
        # The safe constructor raises these for odd scalars (e.g. an out-of-range date).
        raise BadInput(f"{source}: invalid YAML value: {exc}", source=source) from exc
    finally:
        loader.dispose()
    return YamlDoc(data=data, node=node, source=source, line_offset=line_offset)


def _check_nodes(node: yaml.Node, text: str, *, source: str, line_offset: int) -> None:
    """Refuse aliases, duplicate keys and nesting past ``MAX_DEPTH``; a node reached twice
    is an alias.

    Aliases are refused because a few of them expand into exponential structures ("billion
    laughs") and no brief or manifest needs them; tracking visited nodes also keeps this
    walk linear.
    """
    seen_nodes: set[int] = set()
    stack = [(node, 0)]
    while stack:
        current, depth = stack.pop()
        if depth > MAX_DEPTH:
            line = current.start_mark.line + 1 + line_offset
            raise BadInput(
                f"{source} line {line}: YAML nested deeper than {MAX_DEPTH} levels",
                source=source,
            )
        if id(current) in seen_nodes:
            line = _alias_line(text, current) + 1 + line_offset
            raise BadInput(
                f"{source} line {line}: YAML anchors and aliases are not allowed", source=source
            )
        seen_nodes.add(id(current))
        if isinstance(current, yaml.MappingNode):
            keys: set[str] = set()
            for key_node, value_node in current.value:
                if isinstance(key_node, yaml.ScalarNode):
                    if key_node.value in keys:
                        line = key_node.start_mark.line + 1 + line_offset
                        raise BadInput(
                            f"{source} line {line}: {key_node.value}: duplicate key",
                            source=source,
                        )
                    keys.add(key_node.value)
                stack.append((key_node, depth + 1))
                stack.append((value_node, depth + 1))
        elif isinstance(current, yaml.SequenceNode):
            stack.extend((item, depth + 1) for item in current.value)


def _alias_line(text: str, node: yaml.Node) -> int:
    """The 0-based line of the document's first alias (the node reached twice only knows
    its anchor's line). Only on the error path, so the second pass costs nothing normally."""
    try:
        for event in yaml.parse(text, Loader=_Loader):
            if isinstance(event, yaml.AliasEvent) and event.start_mark is not None:
                return int(event.start_mark.line)
    except yaml.YAMLError:
        pass
    return int(node.start_mark.line)


def validation_error(exc: ValidationError, doc: YamlDoc) -> BadInput:
    """Turn pydantic's errors into one ``BadInput`` naming the first field and its line."""
    # A typo'd field shows up twice: as an unknown field and as a missing one. The unknown
    # field is the more useful to read first.
    problems = sorted(
        exc.errors(include_url=False, include_input=False),
        key=lambda problem: problem["type"] != "extra_forbidden",
    )
    if not problems:  # pragma: no cover - pydantic always reports at least one
        return BadInput(f"{doc.source}: invalid document", source=doc.source)
    first = problems[0]
    loc = [element for element in first["loc"] if isinstance(element, str | int)]
    error = doc.bad(loc, describe(first["type"], first["msg"]))
    if len(problems) > 1:
        error.message += f" (and {len(problems) - 1} more)"
        error.args = (error.message,)
    error.details["problems"] = [
        {
            "field": doc.locate(list(p["loc"]))[1],
            "line": doc.line_of(list(p["loc"])),
            "message": describe(p["type"], p["msg"]),
        }
        for p in problems
    ]
    return error


def describe(kind: str, msg: str) -> str:
    """pydantic's message for one error, in Assay's words (lower case, no prefix)."""
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "field required"
    # pydantic prefixes errors raised by our validators with "Value error, ".
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix) :]
    return msg[:1].lower() + msg[1:] if msg else kind
