"""Sweeper policies: the shipped ones load, and every mistake names its file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.errors import BadInput
from assay.sweep.policy import KINDS, WakerPolicy, default_policies, load_policies
from tests.conftest import REPO_ROOT


def test_the_shipped_sweepers_cover_every_kind() -> None:
    policies = load_policies(REPO_ROOT / "sweepers")
    assert sorted(policy.kind for policy in policies) == sorted(KINDS)
    assert all(policy.enabled for policy in policies)
    assert [p.kind for p in default_policies()] == list(KINDS)


def test_name_defaults_to_the_file_stem(tmp_path: Path) -> None:
    (tmp_path / "wake-fast.yaml").write_text("kind: waker\nredispatch_after_s: 5\n")
    [policy] = load_policies(tmp_path)
    assert isinstance(policy, WakerPolicy)
    assert policy.name == "wake-fast"
    assert policy.redispatch_after_s == 5


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("kind: stuck-claim\n", "'kind'"),
        ("skew_s: 3\n", "'kind'"),
        ("kind: stuck-claims\nskew: 3\n", "'skew'"),
        ("kind: stuck-claims\nskew_s: -1\n", "'skew_s'"),
        ("kind: waker\ndispatch: github\n", "'dispatch'"),
        ("kind: orphans\nfix: maybe\n", "'fix'"),
        ("- kind: waker\n", "mapping"),
        ("kind: [waker\n", "invalid YAML"),
    ],
)
def test_bad_policies_are_bad_input_naming_file_and_field(
    tmp_path: Path, text: str, field: str
) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    with pytest.raises(BadInput) as caught:
        load_policies(tmp_path)
    assert caught.value.code == 65
    assert str(path) in caught.value.message
    assert field in caught.value.message


def test_two_policies_with_one_name_are_refused(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("kind: waker\nname: wake\n")
    (tmp_path / "b.yaml").write_text("kind: budgets\nname: wake\n")
    with pytest.raises(BadInput, match=r"b\.yaml: field 'name'"):
        load_policies(tmp_path)


def test_a_missing_directory_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="--sweepers"):
        load_policies(tmp_path / "nope")
