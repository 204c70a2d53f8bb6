"""Briefs from GitHub issues: open issues labelled ``assay``.

An issue's body may start with a brief's YAML front matter (``---`` ... ``---``); ``id``
defaults to ``issue-<number>`` and ``title`` to the issue's title, so a short front matter
with just ``verify:`` rows is enough. Without front matter the brief is built from the issue:
its title, its body, and fields from labels (``desk:NAME``, ``priority:N``; other labels
except ``assay`` become the brief's labels). Parsing and validation are ``parse_brief``'s,
so an issue brief obeys exactly the rules of ``briefs/<id>.md`` (YAML through the one bounded
loader, ``assay.briefs.yamldoc.load_yaml``); a malformed issue is
reported (``BadInput`` naming ``issue #N``, the line and the field) without hiding the others.
The marker label is ``assay`` alone (``assay.github.pins.BRIEF_LABEL``).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml

from assay.briefs import Brief, parse_brief
from assay.briefs.yamldoc import load_yaml
from assay.errors import BadInput
from assay.github.api import GitHubApi
from assay.github.briefids import IdBinding, id_refusal, read_issue_records
from assay.github.pins import BRIEF_LABEL, IssuePin, issue_digest

if TYPE_CHECKING:
    from assay.github.forge import GitHubForge as Forge

_PRIORITY = re.compile(r"priority:(-?\d+)")


@dataclass(frozen=True)
class IssueBrief:
    """A brief, the issue it came from, and whether the issue still says what a writer
    accepted (``current``: the live state's digest is the accepted one; ``pin``: the
    accepted state's record)."""

    brief: Brief
    number: int
    url: str
    current: bool = True
    pin: IssuePin | None = None
    node: str | None = None  # the issue's GraphQL id (the mirror names it by it)


@dataclass
class IssueBriefs:
    """Every open ``assay`` issue, parsed: the good ones by brief id, the bad ones reported."""

    briefs: dict[str, IssueBrief] = field(default_factory=dict)
    errors: list[BadInput] = field(default_factory=list)


def load_issue_briefs(
    api: GitHubApi, *, pins: Mapping[int, IssuePin], bindings: Mapping[str, IdBinding]
) -> IssueBriefs:
    """One conditional list call; a 304 costs nothing against the rate limit.

    Each brief is built from the state a writer accepted (``pins``, see
    ``assay.github.pins``: title, labels and body), never from the live issue; an issue
    with none is reported. Ids are the repository's (``assay.github.briefids``): an issue
    is a brief only under an id bound to it, so an id another issue named first, open or
    closed, is this issue's error, as is ``issue-<M>`` in any issue but #M.
    """
    result = IssueBriefs()
    for issue in sorted(api.open_issues(BRIEF_LABEL), key=lambda item: int(item["number"])):
        number = int(issue["number"])
        pin = pins.get(number)
        if pin is None:
            result.errors.append(
                BadInput(
                    f"issue #{number}: no text of it was accepted by a person with write "
                    f"permission (label it {BRIEF_LABEL!r}, or comment `/assay accept`)",
                    source=f"issue #{number}",
                )
            )
            continue
        try:
            found = brief_from_pin(pin, url=str(issue.get("html_url", "")))
        except BadInput as exc:
            result.errors.append(exc)
            continue
        refusal = id_refusal(found.brief.id, number, bindings)
        if refusal is not None:
            result.errors.append(BadInput(f"issue #{number}: {refusal}", source=f"issue #{number}"))
            continue
        current = issue_digest(issue) == pin.digest
        node = str(issue["node_id"]) if issue.get("node_id") else None
        result.briefs[found.brief.id] = dataclasses.replace(
            found, current=current, pin=pin, node=node
        )
    return result


def issue_briefs(forge: Forge) -> IssueBriefs:
    """``load_issue_briefs`` with the accepted texts and id bindings the forge's trusted
    gate key signed (one listing of their refs)."""
    from assay.evidence.trust import reader_key

    records = read_issue_records(forge, reader_key(forge))
    return load_issue_briefs(forge.api, pins=records.pins, bindings=records.bindings)


def brief_from_pin(pin: IssuePin, *, url: str = "") -> IssueBrief:
    """The brief issue ``pin.issue``'s accepted state declares (its title, labels, body),
    open issue or closed."""
    accepted = {
        "number": pin.issue,
        "title": pin.title,
        "labels": list(pin.labels),
        "body": pin.body,
        "html_url": url,
    }
    return brief_from_issue(accepted)


def brief_from_issue(issue: dict[str, Any]) -> IssueBrief:
    """Parse one issue (a REST ``issue`` object) into a brief."""
    number = int(issue["number"])
    source = f"issue #{number}"
    title = str(issue.get("title") or "").strip()
    body = str(issue.get("body") or "").replace("\r\n", "\n")
    labels = [
        str(item["name"] if isinstance(item, dict) else item) for item in issue.get("labels", [])
    ]
    fields = _fields_from_labels(labels)
    if body.startswith("---\n") or body.rstrip() == "---":
        text = _with_defaults(body, number=number, title=title, fields=fields, source=source)
    else:
        front = {"id": f"issue-{number}", "title": title or f"issue {number}", **fields}
        text = "---\n" + yaml.safe_dump(front, sort_keys=False) + "---\n" + body
    brief = parse_brief(text, source=source)
    return IssueBrief(brief=brief, number=number, url=str(issue.get("html_url", "")))


def _fields_from_labels(labels: list[str]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    plain: list[str] = []
    for name in labels:
        if name == BRIEF_LABEL or name.startswith(f"{BRIEF_LABEL}:"):
            continue  # the marker label and Assay's own claim labels
        if name.startswith("desk:"):
            fields["desk"] = name[len("desk:") :]
        elif _PRIORITY.fullmatch(name):
            fields["priority"] = int(name[len("priority:") :])
        else:
            plain.append(name)
    if plain:
        fields["labels"] = plain
    return fields


def _with_defaults(
    body: str, *, number: int, title: str, fields: dict[str, Any], source: str
) -> str:
    """Add defaulted fields at the end of the front matter, so the issue's own lines keep
    their numbers in error messages."""
    lines = body.split("\n")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "..."))
    except StopIteration:
        raise BadInput(
            f"{source} line {len(lines)}: the front matter is not closed by a '---' line",
            source=source,
        ) from None
    # The one bounded loader: an issue body is anyone's text, and a hostile one (deep,
    # large, aliased) is this brief's BadInput, never an error of the whole command.
    present = load_yaml("\n".join(lines[1:end]), source=source, line_offset=1).data or {}
    extra: dict[str, Any] = {"id": f"issue-{number}", "title": title or f"issue {number}"}
    extra.update(fields)
    added = [
        f"{key}: {json.dumps(value)}"
        for key, value in extra.items()
        if not isinstance(present, dict) or key not in present
    ]
    return "\n".join([*lines[:end], *added, *lines[end:]])
