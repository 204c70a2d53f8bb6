"""Desk manifests: parsing, the checks tied to a desk's kind, takes_brief, load_desks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from assay.briefs import parse_brief
from assay.desks import DeskManifest, ToolBox, load_desks, parse_manifest
from assay.desks.manifests.manifest import parse_duration
from assay.errors import BadInput
from assay.models.scripted import ScriptedModel
from tests.conftest import REPO_ROOT

AGENT = """\
name: coder
description: Writes code.
takes: {labels: [python], ids: [fix-login], globs: ["calc-*"]}
kind: agent
model: {adapter: scripted, script: script.yaml}
tools: [read_file, write_file, run, finish]
run:
  allow: ["pytest -q", "python -m pytest"]
  timeout_s: 2m
  env: [PYTHONPATH]
lease: 90s
budget: {steps: 10, usd: 1.5}
concurrency: 2
on_divergence: fork
secrets: [OPENAI_API_KEY]
"""


def bad(text: str, source: str = "desks/coder.yaml") -> str:
    with pytest.raises(BadInput) as caught:
        parse_manifest(text, source=source)
    assert caught.value.code == 65
    return caught.value.message


def make_brief(brief_id: str, *, labels: str = "[]", desk: str | None = None) -> object:
    extra = f"desk: {desk}\n" if desk else ""
    return parse_brief(
        f"---\nid: {brief_id}\ntitle: T\nlabels: {labels}\n{extra}---\n", source="issue"
    )


def test_an_agent_manifest_parses() -> None:
    desk = parse_manifest(AGENT, source="desks/coder.yaml")
    assert desk.name == "coder" and desk.kind == "agent"
    assert desk.lease == 90.0
    assert desk.concurrency == 2 and desk.on_divergence == "fork"
    assert desk.budget.usd == 1.5 and desk.budget.steps == 10
    assert desk.source == "desks/coder.yaml"
    assert desk.base_dir == Path("desks")
    policy = desk.tool_policy()
    assert policy.allowed == frozenset({"read_file", "write_file", "run", "finish"})
    assert policy.run_prefixes == (("pytest", "-q"), ("python", "-m", "pytest"))
    assert policy.run_timeout_s == 120.0
    assert policy.env == ("PYTHONPATH",)
    assert policy.secrets == ("OPENAI_API_KEY",)


def test_takes_brief_by_label_id_glob_and_explicit_desk() -> None:
    desk = parse_manifest(AGENT, source="desks/coder.yaml")
    assert desk.takes_brief(make_brief("a", labels="[python]"))  # type: ignore[arg-type]
    assert desk.takes_brief(make_brief("fix-login"))  # type: ignore[arg-type]
    assert desk.takes_brief(make_brief("calc-add"))  # type: ignore[arg-type]
    assert not desk.takes_brief(make_brief("docs-x", labels="[docs]"))  # type: ignore[arg-type]
    # A brief naming a desk goes to that desk only, whatever its labels say.
    assert desk.takes_brief(make_brief("z", desk="coder"))  # type: ignore[arg-type]
    assert not desk.takes_brief(  # type: ignore[arg-type]
        make_brief("calc-1", labels="[python]", desk="other")
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("kind: agent", "kind: robot"), "line 4: kind: input should be 'agent', 'command'"),
        (("tools: [read_file,", "tools: [teleport,"), "line 6: tools: unknown tool 'teleport'"),
        (("lease: 90s", "lease: soon"), "line 11: lease: 'soon' is not a duration"),
        (("concurrency: 2", "concurrency: 0"), "line 13: concurrency: input should be greater"),
        (("on_divergence: fork", "on_divergence: ignore"), "line 14: on_divergence"),
        (("script: script.yaml", "scrip: script.yaml"), "model.scrip: unknown field"),
        (("adapter: scripted", "adapter: gpt"), "line 5: model: input tag 'gpt'"),
        (('allow: ["pytest -q", "python -m pytest"]', "allow: []"), "run.allow: list at least"),
        (('allow: ["pytest -q",', 'allow: ["\'unclosed",'), "run.allow: "),
        (("env: [PYTHONPATH]", "env: [1BAD]"), "run.env: '1BAD' is not an environment"),
        (("name: coder", "name: ../coder"), "line 1: name: desk name '../coder'"),
        (("name: coder", "name: other"), "line 1: name: 'other' does not match the file name"),
        (("secrets: [OPENAI_API_KEY]", "secret: [X]"), "line 15: secret: unknown field"),
    ],
)
def test_errors_name_line_and_field(change: tuple[str, str], expected: str) -> None:
    text = AGENT.replace(*change)
    assert text != AGENT
    message = bad(text)
    assert message.startswith("desks/coder.yaml line ")
    assert expected in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "name: coder\nkind: agent\ntools: [finish]\n",
            "line 1: model: an agent desk needs a model",
        ),
        (
            "name: coder\nkind: agent\nmodel: {adapter: scripted, script: s.yaml}\ntools: []\n",
            "line 4: tools: an agent desk needs the finish tool",
        ),
        ("name: coder\nkind: python\n", "entry: a python desk needs entry"),
        ("name: coder\nkind: python\nentry: not-a-module\n", "line 3: entry: entry must be"),
        ("name: coder\nkind: command\n", "command: a command desk needs a command"),
        ("name: coder\nkind: command\ncommand: []\n", "command: a command desk needs a command"),
        (
            "name: coder\nkind: agent\nentry: a:b\nmodel: {adapter: scripted, script: s}\n"
            "tools: [finish]\n",
            "line 3: entry: only a python desk",
        ),
        ("name: coder\nkind: python\nentry: a:b\ncommand: x\n", "line 4: command: only a command"),
        (
            "name: coder\nkind: python\nentry: a:b\ntools: [run]\n",
            "run: the run tool needs a run section",
        ),
        (
            "name: coder\nkind: python\nentry: a:b\nrun: {allow: [ls]}\n",
            "line 4: run: a run section without the run tool",
        ),
        ("- a\n- b\n", "line 1: a desk manifest must be a mapping"),
        ("name: coder\nkind: [unclosed\n", "invalid YAML"),
    ],
)
def test_kind_specific_checks(text: str, expected: str) -> None:
    assert expected in bad(text)


def test_command_desk_splits_a_string_without_a_shell() -> None:
    desk = parse_manifest(
        "name: c\nkind: command\ncommand: my-agent --prompt 'a b; rm -rf /'\n",
        source="desks/c.yaml",
    )
    assert desk.command == ["my-agent", "--prompt", "a b; rm -rf /"]


def test_durations() -> None:
    assert parse_duration(30) == 30.0
    assert parse_duration("1.5m") == 90.0
    assert parse_duration("2h") == 7200.0
    assert parse_duration("250ms") == 0.25
    with pytest.raises(ValueError):
        parse_duration("forever")


def write(directory: Path, name: str, text: str) -> None:
    (directory / name).write_text(text)


def test_load_desks_reads_yaml_and_resolves_paths_from_the_directory(tmp_path: Path) -> None:
    write(tmp_path, "coder.yaml", AGENT)
    write(tmp_path, "script.yaml", "responses:\n  - content: hi\n")  # fails as a manifest...
    write(tmp_path, "README.md", "# desks")
    (tmp_path / "scripts").mkdir()
    # ...so the script lives where a real layout puts it, and the manifest points there.
    (tmp_path / "script.yaml").rename(tmp_path / "scripts" / "s.yaml")
    write(tmp_path, "coder.yaml", AGENT.replace("script.yaml", "scripts/s.yaml"))
    write(tmp_path, "ops.yml", "name: ops\nkind: command\ncommand: [make, deploy]\n")
    desks = load_desks(tmp_path)
    assert sorted(desks) == ["coder", "ops"]
    assert desks["coder"].base_dir == tmp_path
    model = desks["coder"].build_model()
    assert isinstance(model, ScriptedModel)
    assert model.complete([{"role": "user", "content": "x"}]).message["content"] == "hi"


def test_load_desks_refuses_a_broken_manifest_naming_it(tmp_path: Path) -> None:
    write(tmp_path, "good.yaml", "name: good\nkind: command\ncommand: [true]\n")
    write(tmp_path, "bad.yaml", "name: bad\nkind: agent\ncolour: 3\n")
    with pytest.raises(BadInput) as caught:
        load_desks(tmp_path)
    assert caught.value.message.startswith(f"{tmp_path / 'bad.yaml'} line 3: colour")


def test_load_desks_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="no such desks directory"):
        load_desks(tmp_path / "nope")


def test_python_entry_is_imported_from_the_desk_directory(tmp_path: Path) -> None:
    write(tmp_path, "py.yaml", "name: py\nkind: python\nentry: my_desk_mod:run\n")
    write(tmp_path, "my_desk_mod.py", "def run(run, brief):\n    return 'ran ' + brief\n")
    desk = load_desks(tmp_path)["py"]
    try:
        function = desk.resolve_entry()
        assert function(None, "b1") == "ran b1"
    finally:
        sys.modules.pop("my_desk_mod", None)
    assert str(tmp_path.resolve()) not in sys.path


def test_python_entry_errors_are_bad_input(tmp_path: Path) -> None:
    write(tmp_path, "py.yaml", "name: py\nkind: python\nentry: no_such_mod_xyz:run\n")
    with pytest.raises(BadInput, match="cannot import 'no_such_mod_xyz'"):
        load_desks(tmp_path)["py"].resolve_entry()


def test_the_shipped_example_desk_parses_and_runs_its_script() -> None:
    desks = load_desks(REPO_ROOT / "desks")
    desk = desks["example"]
    assert isinstance(desk, DeskManifest)
    assert desk.kind == "agent"
    brief = parse_brief(
        (REPO_ROOT / "briefs" / "example-add-function.md").read_text(),
        source="briefs/example-add-function.md",
    )
    assert desk.takes_brief(brief)
    model = desk.build_model()
    reply = model.complete([{"role": "user", "content": brief.body}])
    assert reply.tool_calls[0]["function"]["name"] == "write_file"
    # Every tool the script calls is declared by the desk.
    box = ToolBox(REPO_ROOT, desk.tool_policy())
    assert isinstance(model, ScriptedModel)
    for response in model.script.responses:
        for call in response.tool_calls:
            assert call.name in box.allowed


def test_secret_names_include_the_model_key(monkeypatch: pytest.MonkeyPatch) -> None:
    desk = parse_manifest(
        AGENT.replace(
            "model: {adapter: scripted, script: script.yaml}",
            "model: {adapter: openai, model: m, api_key_env: MY_KEY}",
        ),
        source="desks/coder.yaml",
    )
    assert desk.secret_names() == ["OPENAI_API_KEY", "MY_KEY"]
    monkeypatch.setenv("MY_KEY", "sk-1")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert desk.secret_values() == ["sk-1"]
