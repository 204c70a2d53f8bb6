"""A secret the agent writes into the work tree never reaches the forge, in any encoding.

The real desk loop runs a scripted model that makes a file holding a secret's value: the
checkpoint is refused (exit 77), a ``denied`` entry names the file and never the value, and
no object on the forge holds the value in that form.
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import pytest

from assay.sandbox.scan import CheckpointScan, needles
from tests.desks.world import World, brief_text, call, finish
from tests.sandbox.probe import objects_holding

SECRET = "canary/scan+key=0x5eed42"  # URL-encoding changes it; base64 alignment matters


def _spaced(value: str) -> str:
    return " ".join(value)


ENCODINGS: dict[str, Callable[[str], str]] = {
    "raw": lambda v: v,
    "base64": lambda v: base64.b64encode(v.encode()).decode(),
    "base64-in-a-header": lambda v: base64.b64encode(f"x-access-token:{v}".encode()).decode(),
    "base64url": lambda v: base64.urlsafe_b64encode(v.encode()).decode(),
    "hex": lambda v: v.encode().hex(),
    "url-encoding": lambda v: urllib.parse.quote(v, safe=""),
    "reversed": lambda v: v[::-1],
    "spaced": _spaced,
    "split-over-lines": lambda v: "\n".join(v[i : i + 5] for i in range(0, len(v), 5)),
}


def _maker(text: str) -> str:
    """A script writing ``text`` to leak.txt that holds no recognisable form of it itself."""
    masked = [b ^ 0x5A for b in text.encode()]
    return (
        "from pathlib import Path\n"
        f"Path('leak.txt').write_bytes(bytes(b ^ 0x5A for b in {masked!r}))\n"
    )


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
@pytest.mark.parametrize("variable", ["DEPLOY_SECRET", "ASSAY_MODEL_API_KEY"])
def test_a_secret_written_to_a_file_refuses_the_checkpoint(
    world: World, monkeypatch: pytest.MonkeyPatch, encoding: str, variable: str
) -> None:
    # DEPLOY_SECRET is listed in the desk's secrets; ASSAY_MODEL_API_KEY is not listed
    # anywhere: its name alone makes it a secret.
    monkeypatch.setenv(variable, SECRET)
    leaked = ENCODINGS[encoding](SECRET)
    world.add_briefs(brief_text("b1"))
    world.add_desk(
        "coder",
        [
            {"tool_calls": [call("write_file", path="make.py", content=_maker(leaked))]},
            {"tool_calls": [call("run", command="python make.py")]},
            {"content": "made it"},
            finish("done"),
        ],
        tools=("write_file", "run", "finish"),
        run={"allow": ["python make.py"]},
        secrets=["DEPLOY_SECRET"],
    )
    [report] = world.run_here("coder")
    assert report.code == 77, report
    tree = world.root / "machine-a" / "work" / "coder" / "b1"
    assert (tree / "leak.txt").read_text() == leaked  # the file was made, and stayed local
    denied = [e for e in world.wal("a", "coder", "b1") if e["kind"] == "denied"]
    assert len(denied) == 1 and denied[0]["step"] == "checkpoint"
    assert denied[0]["file"] == "leak.txt" and "leak.txt" in denied[0]["reason"]
    line = json.dumps(denied[0])
    assert SECRET not in line and leaked not in line
    squeezed = "".join(leaked.split()).encode()
    assert objects_holding(world.forge_path, [leaked.encode(), squeezed, SECRET.encode()]) == []


def test_a_secret_the_model_writes_directly_is_refused_and_never_journaled(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEPLOY_SECRET", SECRET)
    b64 = base64.b64encode(SECRET.encode()).decode()
    world.add_briefs(brief_text("b1"))
    world.add_desk(
        "coder",
        [
            {"tool_calls": [call("write_file", path=f"notes-{SECRET[:6]}.txt", content=b64)]},
            {"content": "wrote it"},
            finish("done"),
        ],
        secrets=["DEPLOY_SECRET"],
    )
    [report] = world.run_here("coder")
    assert report.code == 77, report
    denied = [e for e in world.wal("a", "coder", "b1") if e["kind"] == "denied"]
    assert denied and b64 not in json.dumps(denied) and SECRET not in json.dumps(denied)
    assert objects_holding(world.forge_path, [b64.encode(), SECRET.encode()]) == []


def test_a_secret_in_a_file_name_is_found(tmp_path: Path) -> None:
    name = f"dump-{base64.urlsafe_b64encode(SECRET.encode()).decode()}.txt"
    scan = CheckpointScan([SECRET])
    (tmp_path / "harmless.txt").write_text("nothing here\n")
    scan.check(tmp_path, ["harmless.txt"])
    with pytest.raises(Exception, match="file name") as refused:
        scan.check(tmp_path, [name])
    assert SECRET not in str(refused.value)


def test_every_encoding_has_a_needle_and_short_values_are_ignored() -> None:
    kinds = {needle.encoding for needle in needles("~~~canary???>>>")}  # "+" and "/" in base64
    assert {"raw", "reversed", "base64", "base64url", "hex", "url-encoding"} <= kinds
    assert not CheckpointScan(["1", "yes"])  # would match ordinary text everywhere
