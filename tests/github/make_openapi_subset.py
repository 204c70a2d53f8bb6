"""Regenerate ``openapi_subset.json``: the slice of GitHub's REST description the fake serves.

GitHub publishes its REST API as an OpenAPI document in the npm package ``@octokit/openapi``.
The full description is tens of megabytes; the fake GitHub server validates every request and
response against only the operations Assay calls, so this script keeps those operations and
every component they reference (transitively), and drops prose (descriptions, examples) that
validation never reads. Run it after fetching the package::

    cd "$(mktemp -d)" && npm pack @octokit/openapi && tar xzf octokit-openapi-*.tgz
    python tests/github/make_openapi_subset.py package

It rewrites ``tests/github/openapi_subset.json`` next to this file, deterministically.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

# The operations the GitHub adapter (and the tests that drive the fake) call.
OPERATIONS = (
    "actions/create-workflow-dispatch",
    "actions/get-workflow-run",
    "actions/list-workflow-runs-for-repo",
    "checks/create",
    "checks/list-for-ref",
    "checks/update",
    "git/get-ref",
    "git/list-matching-refs",
    "issues/add-labels",
    "issues/create",
    "issues/create-comment",
    "issues/create-label",
    "issues/get",
    "issues/get-label",
    "issues/list-comments",
    "issues/list-comments-for-repo",
    "issues/list-events-for-timeline",
    "issues/list-for-repo",
    "issues/remove-label",
    "issues/update",
    "issues/update-comment",
    "pulls/create",
    "pulls/create-review",
    "pulls/get",
    "pulls/list",
    "pulls/list-reviews",
    "pulls/merge",
    "pulls/update",
    "rate-limit/get",
    "repos/get",
    "repos/get-collaborator-permission-level",
)

# Keys that carry prose or samples only; validation never reads them.
# ``description`` is required on response objects, so it is kept but emptied.
_DROP = {"examples", "example", "externalDocs", "summary", "x-github", "tags"}

OUTPUT = Path(__file__).resolve().parent / "openapi_subset.json"


def _strip(node: Any, *, in_properties: bool = False) -> Any:
    """Drop prose keys everywhere except where they are names (schema property names)."""
    if isinstance(node, dict):
        result: dict[str, Any] = {}
        for key, value in node.items():
            if key in _DROP and not in_properties:
                continue
            if key == "description" and not in_properties and isinstance(value, str):
                result[key] = ""
                continue
            result[key] = _strip(value, in_properties=key == "properties" and not in_properties)
        return result
    if isinstance(node, list):
        return [_strip(item) for item in node]
    return node


def _null_in_enums(node: Any) -> Any:
    """``nullable`` with an ``enum`` admits null only when the enum lists it (OpenAPI
    3.0.3), and GitHub's description leaves it out (a check run in progress has
    ``conclusion: null``): list it, so the validator accepts what GitHub sends."""
    if isinstance(node, dict):
        result = {key: _null_in_enums(value) for key, value in node.items()}
        enum = result.get("enum")
        if result.get("nullable") is True and isinstance(enum, list) and None not in enum:
            result["enum"] = [*enum, None]
        return result
    if isinstance(node, list):
        return [_null_in_enums(item) for item in node]
    return node


def _refs(node: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            found.add(ref)
        for value in node.values():
            found |= _refs(value)
    elif isinstance(node, list):
        for item in node:
            found |= _refs(item)
    return found


def subset(full: dict[str, Any], *, source: str) -> dict[str, Any]:
    """The trimmed description: chosen operations plus their transitive components."""
    wanted = set(OPERATIONS)
    paths: dict[str, Any] = {}
    for path, item in full["paths"].items():
        for method, operation in item.items():
            if isinstance(operation, dict) and operation.get("operationId") in wanted:
                paths.setdefault(path, {})[method] = _strip(operation)
                wanted.discard(operation["operationId"])
    if wanted:
        raise SystemExit(f"operations missing from the description: {sorted(wanted)}")
    components: dict[str, dict[str, Any]] = {}
    pending = _refs(paths)
    seen: set[str] = set()
    while pending:
        ref = pending.pop()
        if ref in seen:
            continue
        seen.add(ref)
        _, _, kind, name = ref.split("/", 3)
        if kind == "examples":
            continue
        body = _strip(full["components"][kind][name])
        components.setdefault(kind, {})[name] = body
        pending |= _refs(body) - seen
    for kind in components:
        components[kind] = _null_in_enums(dict(sorted(components[kind].items())))
    return {
        "openapi": full["openapi"],
        "info": {
            "title": "GitHub REST API (subset for Assay's tests)",
            "version": full["info"]["version"],
            "x-source": source,
        },
        "servers": full["servers"],
        "paths": dict(sorted(paths.items())),
        "components": dict(sorted(components.items())),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", type=Path, help="the unpacked @octokit/openapi package")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    source = args.package / "generated" / "api.github.com.json"
    full = json.loads(source.read_text(encoding="utf-8"))
    version = json.loads((args.package / "package.json").read_text(encoding="utf-8"))["version"]
    trimmed = subset(full, source=f"@octokit/openapi {version} generated/api.github.com.json")
    args.output.write_text(json.dumps(trimmed, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.output} from @octokit/openapi {version}: {len(trimmed['paths'])} paths")
    return 0


if __name__ == "__main__":
    sys.exit(main())
