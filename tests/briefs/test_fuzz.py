"""Fuzzing the brief parser and the desk manifest loader: a typed error or a value, never a
traceback of some other kind."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.briefs import Brief, parse_brief
from assay.briefs.format import FRONT_MATTER_FIELDS
from assay.desks import DeskManifest, parse_manifest
from assay.errors import BadInput
from assay.models import parse_model_config
from assay.models.scripted import Script, load_script
from tests.briefs.test_format import GOOD

FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["pytest -q", "a/b", "..", "3.11", "x.md", "5m", "'", '"', "\x00"]),
)
MANIFEST_FIELDS = (*DeskManifest.model_fields, "adapter", "script", "allow", "argv")


def values(keys: tuple[str, ...]) -> st.SearchStrategy[Any]:
    key = st.one_of(st.sampled_from(keys), st.text(max_size=8))
    return st.recursive(
        scalars,
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(key, children, max_size=5),
        ),
        max_leaves=20,
    )


def mappings(keys: tuple[str, ...]) -> st.SearchStrategy[dict[Any, Any]]:
    return st.dictionaries(st.sampled_from(keys), values(keys), max_size=len(keys))


def check_brief(text: str) -> None:
    try:
        result = parse_brief(text, source="briefs/x.md")
    except BadInput as exc:
        assert exc.code == 65
        assert exc.message.startswith("briefs/x.md")
    else:
        assert isinstance(result, Brief)
        assert result.id == "x"


def check_manifest(text: str) -> None:
    try:
        result = parse_manifest(text, source="desks/x.yaml")
    except BadInput as exc:
        assert exc.code == 65
        assert exc.message.startswith("desks/x.yaml")
    else:
        assert isinstance(result, DeskManifest)
        assert result.name == "x"


@FUZZ
@given(st.text(max_size=400))
def test_brief_arbitrary_text(text: str) -> None:
    check_brief(text)
    check_brief("---\n" + text + "\n---\n")


@FUZZ
@given(mappings(FRONT_MATTER_FIELDS), st.text(max_size=50))
def test_brief_structured_front_matter(front: dict[Any, Any], body: str) -> None:
    front.setdefault("id", "x")
    dumped = yaml.safe_dump(front, allow_unicode=True)
    check_brief(f"---\n{dumped}---\n{body}")


@FUZZ
@given(st.data())
def test_brief_mutations_of_a_good_brief(data: st.DataObject) -> None:
    text = GOOD.replace("id: add-median", "id: x")
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(text)))
        cut = data.draw(st.integers(0, 8))
        insert = data.draw(st.text(alphabet=":-[]{}'\"\n #&*!|>x0", max_size=4))
        text = text[:at] + insert + text[at + cut :]
    check_brief(text)


@FUZZ
@given(st.text(max_size=400))
def test_manifest_arbitrary_text(text: str) -> None:
    check_manifest(text)


@FUZZ
@given(mappings(MANIFEST_FIELDS))
def test_manifest_structured(document: dict[Any, Any]) -> None:
    document.setdefault("name", "x")
    check_manifest(yaml.safe_dump(document, allow_unicode=True))


@FUZZ
@given(
    st.sampled_from(["agent", "command", "python", "other"]),
    st.one_of(
        st.none(),
        st.fixed_dictionaries(
            {"adapter": st.sampled_from(["openai", "anthropic", "command", "scripted", "x"])},
            optional={
                "model": scalars,
                "script": scalars,
                "argv": values(("a",)),
                "base_url": scalars,
                "price": values(("in_per_1k", "out_per_1k")),
            },
        ),
    ),
    st.lists(st.sampled_from(["read_file", "run", "finish", "nope"]), max_size=4),
    st.one_of(st.none(), values(("allow", "timeout_s", "env"))),
)
def test_manifest_near_valid(kind: str, model: Any, tools: list[str], run: Any) -> None:
    document: dict[str, Any] = {"name": "x", "kind": kind, "tools": tools}
    if model is not None:
        document["model"] = model
    if run is not None:
        document["run"] = run
    check_manifest(yaml.safe_dump(document, allow_unicode=True))


@FUZZ
@given(st.one_of(st.text(max_size=300), values(("responses", "content", "tool_calls", "name"))))
def test_model_script_only_typed_errors(document: Any) -> None:
    text = document if isinstance(document, str) else yaml.safe_dump(document)
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "s.yaml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            assert isinstance(load_script(path, source="s.yaml"), Script)
        except BadInput as exc:
            assert exc.message.startswith("s.yaml")


@FUZZ
@given(values(("adapter", "model", "script", "argv", "base_url", "price", "openai", "scripted")))
def test_model_config_only_typed_errors(config: Any) -> None:
    try:
        parse_model_config(config)
    except BadInput as exc:
        assert exc.message.startswith("model")
