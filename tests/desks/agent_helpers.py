"""Building an agent desk run in a temporary work tree, for the agent loop's tests."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assay.briefs import Brief, parse_brief
from assay.desks.kinds.agent import AgentOptions, run_agent, worktree_fingerprint
from assay.desks.kinds.tools import ToolBox, ToolPolicy
from assay.journal import read_journal
from assay.models import build_model
from assay.models.base import Message, ModelReply, ToolSpec
from assay.runtime import Budget, RunResult, execute

BRIEF = """---
id: b1
title: Write the greeting
verify:
  - id: unit
    run: python -c "print(1)"
---
Write hello.txt with the word hello.
"""


class CountingModel:
    """The scripted adapter, counting the calls that reach it (the paid boundary)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.context_window = inner.context_window
        self.requests: list[list[Message]] = []

    def complete(
        self, messages: list[Message], *, tools: list[ToolSpec] | None = None
    ) -> ModelReply:
        self.requests.append([dict(m) for m in messages])
        reply: ModelReply = self.inner.complete(messages, tools=tools)
        return reply


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


@dataclass
class AgentRig:
    root: Path
    worktree: Path
    journal_dir: Path
    brief: Brief
    model: CountingModel
    tools: ToolBox
    options: AgentOptions

    def execute(self, *, budget: Budget | None = None) -> RunResult:
        def desk(run: Any, given: Any) -> Any:
            return run_agent(
                run,
                self.brief,
                options=self.options,
                context_window=self.model.context_window,
                fingerprint=worktree_fingerprint(
                    self.brief.env, self.worktree, self.tools.process_env()
                ),
                tool_specs=self.tools.specs(),
            ).to_json()

        return execute(
            desk,
            {"brief": self.brief.id},
            journal_dir=self.journal_dir,
            model=self.model,
            tools=self.tools,
            budget=budget,
        )

    def entries(self) -> list[dict[str, Any]]:
        return read_journal(self.journal_dir).entries


def make_rig(
    tmp_path: Path,
    responses: list[dict[str, Any]],
    *,
    tools: tuple[str, ...] = ("read_file", "write_file", "list_files", "finish"),
    context_window: int = 1_000_000,
    brief: str = BRIEF,
    options: AgentOptions | None = None,
) -> AgentRig:
    worktree = tmp_path / "tree"
    worktree.mkdir()
    script = tmp_path / "script.yaml"
    script.write_text(json.dumps({"responses": responses}), encoding="utf-8")
    adapter = build_model(
        {"adapter": "scripted", "script": "script.yaml", "context_window": context_window},
        base_dir=tmp_path,
    )
    parsed = parse_brief(brief, source="briefs/b1.md")
    return AgentRig(
        root=tmp_path,
        worktree=worktree,
        journal_dir=worktree / ".assay" / "journal" / parsed.id,
        brief=parsed,
        model=CountingModel(adapter),
        tools=ToolBox(worktree, ToolPolicy(allowed=frozenset(tools))),
        options=options or AgentOptions(),
    )
