"""The demo's material: the shipped desk parses, and a real endpoint replaces the script."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.demo.material import real_model, write_workspace
from assay.desks import load_desks


def test_the_shipped_desk_uses_the_scripted_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ASSAY_MODEL_BASE_URL", raising=False)
    write_workspace(tmp_path, model=real_model())
    desk = load_desks(tmp_path / "desks")["demo"]
    assert desk.model.adapter == "scripted"
    assert sorted(p.name for p in (tmp_path / "sweepers").iterdir()) == [
        "budgets.yaml",
        "honest-status.yaml",
        "orphans.yaml",
        "stuck-claims.yaml",
        "waker.yaml",
    ]


def test_an_openai_compatible_endpoint_replaces_the_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASSAY_MODEL_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("ASSAY_MODEL", "local-model")
    monkeypatch.setenv("ASSAY_MODEL_API_KEY_ENV", "LOCAL_KEY")
    monkeypatch.setenv("LOCAL_KEY", "sk-never-written")
    write_workspace(tmp_path, model=real_model())
    desk = load_desks(tmp_path / "desks")["demo"]
    assert desk.model.adapter == "openai"
    assert (desk.model.base_url, desk.model.model) == ("http://127.0.0.1:9/v1", "local-model")
    assert desk.model.api_key_env == "LOCAL_KEY"
    assert "sk-never-written" not in (tmp_path / "desks" / "demo.yaml").read_text()
