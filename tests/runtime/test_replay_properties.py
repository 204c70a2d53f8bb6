"""Property test at the runtime level: any sequence of steps, run then replayed, returns
the same values, and no body runs twice."""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.models.base import Message, ModelReply, ToolSpec
from assay.runtime import Replayer, Run, execute
from tests.runtime.helpers import Approve

values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
plans = st.lists(
    st.tuples(st.sampled_from(["compute", "effect", "model", "checkpoint", "uuid"]), values),
    min_size=1,
    max_size=10,
)


class Parrot:
    name = "parrot"
    context_window = 1000

    def __init__(self) -> None:
        self.calls = 0

    def complete(
        self, messages: list[Message], *, tools: list[ToolSpec] | None = None
    ) -> ModelReply:
        self.calls += 1
        return ModelReply({"role": "assistant", "content": messages[-1]["content"]})


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans)
def test_any_step_sequence_replays_to_the_same_values(plan: list[tuple[str, Any]]) -> None:
    ran: Counter[int] = Counter()
    seen: list[list[Any]] = []

    def desk(run: Run, _: Any) -> Any:
        got: list[Any] = []
        for i, (kind, value) in enumerate(plan):

            def body(i: int = i, value: Any = value) -> Any:
                ran[i] += 1
                return value

            if kind == "compute":
                got.append(run.step(f"c{i}", body))
            elif kind == "effect":
                got.append(run.effect(f"e{i}", lambda key, body=body: body()))
            elif kind == "model":
                got.append(run.model([{"role": "user", "content": repr(value)}]).message)
            elif kind == "checkpoint":
                run.checkpoint(body())
                got.append(run.state())
            else:
                got.append(run.uuid())
        seen.append(got)
        run.wait_for("approval")
        return got

    directory = Path(tempfile.mkdtemp())
    model = Parrot()
    try:
        first = execute(desk, None, journal_dir=directory, model=model, fsync=False)
        assert first.code == 75
        done = execute(desk, None, journal_dir=directory, model=model, hooks=Approve(), fsync=False)
        assert done.code == 0
        assert seen[0] == seen[1] == done.output
        # step bodies ran once; a checkpoint's state is computed by the desk code itself
        assert all(ran[i] == 1 for i, (kind, _) in enumerate(plan) if kind in {"compute", "effect"})
        assert model.calls == sum(kind == "model" for kind, _ in plan)
        replay = Replayer(desk).replay(directory)
        assert replay.matched and replay.finished and replay.output == done.output
    finally:
        shutil.rmtree(directory)
