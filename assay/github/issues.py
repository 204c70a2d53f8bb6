"""Briefs from GitHub issues: open issues labelled ``assay``.

An issue's body may start with a brief's YAML front matter (``---`` ... ``---``); ``id``
defaults to ``issue-<number>`` and ``title`` to the issue's title, so a short front matter
with just ``verify:`` rows is enough. Without front matter the brief is built from the issue:
its title, its body, and fields from labels (``desk:NAME``, ``priority:N``; other labels
except ``assay`` become the brief's labels). Parsing and validation are ``parse_brief``'s,
so an issue brief obeys exactly the rules of ``briefs/<id>.md`` (YAML through the one bounded
loader, ``assay.briefs.yamldoc.load_yaml``); a malformed issue is
reported (``BadInput`` naming ``issue #N``, the line and the field) without hiding the others.
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
from assay.github.pins import BRIEF_LABEL, IssuePin, issue_digest, read_pins

if TYPE_CHECKING:
    from assay.github.forge import GitHubForge as Forge

_PRIORITY = re.compile(r"priority:(-?\d+)")
_NUMBERED = re.compile(r"issue-(\d+)")


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


@dataclass
class IssueBriefs:
    """Every open ``assay`` issue, parsed: the good ones by brief id, the bad ones reported."""

    briefs: dict[str, IssueBrief] = field(default_factory=dict)
    errors: list[BadInput] = field(default_factory=list)


def load_issue_briefs(
    api: GitHubApi, *, pins: Mapping[int, IssuePin], label: str = BRIEF_LABEL
) -> IssueBriefs:
    """One conditional list call; a 304 costs nothing against the rate limit.

    Each brief is built from the state a writer accepted (``pins``, see
    ``assay.github.pins``: title, labels and body), never from the live issue; an issue
    with none is reported.
    Ids are the repository's: ``issue-<M>`` belongs to issue #M alone, and the oldest
    issue naming any other id keeps it (GitHub lists the newest first, so a new issue
    reusing a brief's id cannot take that brief over): the newer one is reported.
    """
    result = IssueBriefs()
    for issue in sorted(api.open_issues(label), key=lambda item: int(item["number"])):
        number = int(issue["number"])
        pin = pins.get(number)
        if pin is None:
            result.errors.append(
                BadInput(
                    f"issue #{number}: no text of it was accepted by a person with write "
                    f"permission (label it {label!r}, or comment `/assay accept`)",
                    source=f"issue #{number}",
                )
            )
            continue
        try:
            accepted = {**issue, "title": pin.title, "labels": list(pin.labels), "body": pin.body}
            found = brief_from_issue(accepted, label=label)
        except BadInput as exc:
            result.errors.append(exc)
            continue
        owner = _NUMBERED.fullmatch(found.brief.id)
        if owner is not None and int(owner[1]) != number:
            result.errors.append(
                BadInput(
                    f"issue #{number}: brief id {found.brief.id!r} is issue #{owner[1]}'s: "
                    f"an id of the form issue-N names issue #N alone",
                    source=f"issue #{number}",
                )
            )
            continue
        if found.brief.id in result.briefs:
            first = result.briefs[found.brief.id].number
            result.errors.append(
                BadInput(
                    f"issue #{found.number}: brief id {found.brief.id!r} is already used by "
                    f"issue #{first}",
                    source=f"issue #{found.number}",
                )
            )
            continue
        current = issue_digest(issue) == pin.digest
        result.briefs[found.brief.id] = dataclasses.replace(found, current=current, pin=pin)
    return result


def issue_briefs(forge: Forge, *, label: str = BRIEF_LABEL) -> IssueBriefs:
    """``load_issue_briefs`` with the accepted texts the forge's trusted gate key signed."""
    from assay.evidence.trust import reader_key

    return load_issue_briefs(forge.api, pins=read_pins(forge, reader_key(forge)), label=label)


def brief_from_issue(issue: dict[str, Any], *, label: str = BRIEF_LABEL) -> IssueBrief:
    """Parse one issue (a REST ``issue`` object) into a brief."""
    number = int(issue["number"])
    source = f"issue #{number}"
    title = str(issue.get("title") or "").strip()
    body = str(issue.get("body") or "").replace("\r\n", "\n")
    labels = [
        str(item["name"] if isinstance(item, dict) else item) for item in issue.get("labels", [])
    ]
    fields = _fields_from_labels(labels, label=label)
    if body.startswith("---\n") or body.rstrip() == "---":
        text = _with_defaults(body, number=number, title=title, fields=fields, source=source)
    else:
        front = {"id": f"issue-{number}", "title": title or f"issue {number}", **fields}
        text = "---\n" + yaml.safe_dump(front, sort_keys=False) + "---\n" + body
    brief = parse_brief(text, source=source)
    return IssueBrief(brief=brief, number=number, url=str(issue.get("html_url", "")))


def _fields_from_labels(labels: list[str], *, label: str) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    plain: list[str] = []
    for name in labels:
        if name == label or name.startswith(f"{label}:"):
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
