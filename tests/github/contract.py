"""GitHub's published REST contract, as the fake server enforces it.

``openapi_subset.json`` is a slice of ``@octokit/openapi`` (regenerate it with
``make_openapi_subset.py``). ``Contract`` validates every request the fake receives and every
response it sends against that slice, and builds schema-complete objects (``skeleton``) so the
fake's responses carry every field GitHub documents as required, not just the ones Assay reads.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import jsonschema
from openapi_core import OpenAPI
from openapi_core.templating.responses.exceptions import ResponseNotFound
from openapi_core.testing import MockRequest, MockResponse

SUBSET = Path(__file__).resolve().parent / "openapi_subset.json"
HOST = "https://api.github.com"
STAMP = "2026-01-01T00:00:00Z"


class ContractViolation(AssertionError):
    """A request or response that GitHub's published description does not allow."""


class Contract:
    """The OpenAPI subset, loaded once: validation plus schema-driven object skeletons."""

    def __init__(self, path: Path = SUBSET) -> None:
        self.raw: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        self.api = OpenAPI.from_dict(copy.deepcopy(self.raw))
        self._skeletons: dict[str, Any] = {}

    # -- validation -------------------------------------------------------------------------

    def check_request(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]],
        headers: dict[str, str],
        body: bytes,
    ) -> None:
        request = self._request(method, path, query=query, headers=headers, body=body)
        try:
            self.api.validate_request(request)
        except Exception as exc:
            raise ContractViolation(f"request {method} {path}: {_explain(exc)}") from exc

    def check_response(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]],
        headers: dict[str, str],
        body: bytes,
        status: int,
        response_headers: dict[str, str],
        response_body: bytes,
    ) -> None:
        if status == 304:
            if response_body:
                raise ContractViolation(f"response {method} {path}: a 304 carries no body")
            return
        request = self._request(method, path, query=query, headers=headers, body=body)
        response = MockResponse(
            response_body,
            status_code=status,
            headers=response_headers,
            content_type="application/json" if response_body else "",
        )
        try:
            self.api.validate_response(request, response)
        except ResponseNotFound as exc:
            # GitHub answers 401/403/429 on every operation though few operations document
            # them; such bodies must still be GitHub's ``basic-error`` shape.
            if status < 400:
                raise ContractViolation(f"response {method} {path}: status {status}") from exc
            self.check_schema("basic-error", json.loads(response_body or b"{}"))
        except Exception as exc:
            raise ContractViolation(
                f"response {method} {path} {status}: {_explain(exc)}\n{response_body[:400]!r}"
            ) from exc

    def check_schema(self, name: str, instance: Any) -> None:
        schema = {**self.raw["components"]["schemas"][name], "components": self.raw["components"]}
        try:
            jsonschema.validate(instance, _jsonschema(schema))
        except jsonschema.ValidationError as exc:
            raise ContractViolation(f"{name}: {exc.message}") from exc

    def _request(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]],
        headers: dict[str, str],
        body: bytes,
    ) -> MockRequest:
        return MockRequest(
            HOST,
            method.lower(),
            path,
            args=query,  # type: ignore[arg-type]  # a list of pairs keeps repeated keys
            headers=headers,
            data=body,
            content_type="application/json" if body else "",
        )

    # -- skeletons ----------------------------------------------------------------------------

    def skeleton(self, name: str) -> Any:
        """A minimal instance of ``components/schemas/<name>`` holding every required field."""
        if name not in self._skeletons:
            # The named schema itself is built even when it is nullable where it is used.
            schema = dict(self.raw["components"]["schemas"][name])
            schema.pop("nullable", None)
            self._skeletons[name] = self._build(schema, depth=0)
        return copy.deepcopy(self._skeletons[name])

    def _build(self, schema: dict[str, Any], *, depth: int) -> Any:
        if "$ref" in schema:
            kind, name = schema["$ref"].split("/")[-2:]
            return self._build(self.raw["components"][kind][name], depth=depth + 1)
        if schema.get("nullable"):
            return None
        if "allOf" in schema:
            merged: dict[str, Any] = {}
            for part in schema["allOf"]:
                value = self._build(part, depth=depth + 1)
                if isinstance(value, dict):
                    merged.update(value)
            return merged
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self._build(schema[key][0], depth=depth + 1)
        if "enum" in schema:
            return schema["enum"][0]
        kind = schema.get("type", "object")
        if kind == "object":
            props = schema.get("properties", {})
            return {
                key: self._build(props.get(key, {}), depth=depth + 1)
                for key in schema.get("required", [])
            }
        if kind == "array":
            return []
        if kind == "string":
            fmt = schema.get("format")
            if fmt == "date-time":
                return STAMP
            if fmt == "uri":
                return "https://example.invalid/"
            return "x" * int(schema.get("minLength", 0))
        if kind in ("integer", "number"):
            return int(schema.get("minimum", 0))
        if kind == "boolean":
            return False
        raise ContractViolation(f"no skeleton for schema type {kind!r}")


def _jsonschema(schema: dict[str, Any]) -> dict[str, Any]:
    """OpenAPI 3.0 ``nullable`` and ``#/components`` references, as plain JSON Schema."""

    def convert(node: Any) -> Any:
        if isinstance(node, dict):
            out = {key: convert(value) for key, value in node.items() if key != "nullable"}
            if node.get("nullable") and "type" in node:
                out["type"] = [node["type"], "null"]
            return out
        if isinstance(node, list):
            return [convert(item) for item in node]
        return node

    return dict(convert(schema))


def _explain(exc: BaseException) -> str:
    parts = [str(exc)]
    cause = exc.__cause__
    while cause is not None:
        parts.append(str(cause))
        cause = cause.__cause__
    return " <- ".join(parts)[:2000]


@functools.cache
def contract() -> Contract:
    """The process-wide contract (loading and checking the description takes a moment)."""
    return Contract()
