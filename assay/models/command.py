"""The ``command`` adapter: an external agent CLI run as one model step.

The conversation is rendered as plain text and handed to the program on stdin (or in a
file whose path replaces an argv element that is exactly ``{prompt_file}``). The argv comes
from the manifest and is executed directly, never through a shell, in the work tree the
desk binds (``workdir``), with a small environment plus the variables the manifest names.
The program's output becomes the assistant message; the files it changed are committed by
the desk's next recorded step.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from pathlib import Path

from assay.errors import BadInput, Failed
from assay.models.base import Message, ModelReply, ToolSpec, Usage, estimate_tokens
from assay.models.config import CommandConfig

PROMPT_FILE = "{prompt_file}"
_BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "TMPDIR")


def render_transcript(messages: list[Message]) -> str:
    """The conversation as Markdown-ish text, one section a message."""
    sections: list[str] = []
    for message in messages:
        role = str(message.get("role", "user"))
        content = message.get("content")
        text = content if isinstance(content, str) else ("" if content is None else str(content))
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            text += f"\n[tool call {function.get('name')}: {function.get('arguments')}]"
        sections.append(f"## {role}\n\n{text.strip()}")
    return "\n\n".join(sections) + "\n"


class CommandModel:
    """``ModelAdapter`` running an agent CLI once per call."""

    name = "command"

    def __init__(self, config: CommandConfig, *, workdir: Path) -> None:
        self.config = config
        self.context_window = config.context_window
        self.workdir = workdir

    def environment(self) -> dict[str, str]:
        """What the program sees: a few harmless variables plus the declared ones."""
        names = (*_BASE_ENV, *self.config.env)
        return {name: os.environ[name] for name in names if name in os.environ}

    def complete(
        self, messages: list[Message], *, tools: list[ToolSpec] | None = None
    ) -> ModelReply:
        """Run the program; ``Failed`` when it exits non-zero or times out."""
        prompt = render_transcript(messages)
        argv = list(self.config.argv)
        if not self.workdir.is_dir():
            raise BadInput(f"command model: work directory {self.workdir} does not exist")
        with tempfile.TemporaryDirectory(prefix="assay-prompt-") as scratch:
            stdin_text: str | None = prompt
            if self.config.prompt == "file":
                prompt_path = Path(scratch) / "prompt.md"
                prompt_path.write_text(prompt, encoding="utf-8")
                if PROMPT_FILE in argv:
                    argv = [str(prompt_path) if a == PROMPT_FILE else a for a in argv]
                else:
                    argv.append(str(prompt_path))
                stdin_text = None
            output, code = self._execute(argv, stdin_text)
        if code is None:
            raise Failed(f"agent command {argv[0]} timed out after {self.config.timeout_s:g} s")
        if code != 0:
            raise Failed(f"agent command {argv[0]} exited {code}: {output[-500:]}")
        message: Message = {"role": "assistant", "content": output}
        usage = Usage(estimate_tokens(messages), len(output) // 4, 0.0)
        return ModelReply(message=message, usage=usage, model=argv[0], stop="stop")

    def _execute(self, argv: list[str], stdin_text: str | None) -> tuple[str, int | None]:
        try:
            process = subprocess.Popen(
                argv,
                cwd=self.workdir,
                env=self.environment(),
                stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            raise BadInput(f"command model: cannot start {argv[0]!r}: {exc}") from exc
        try:
            out, _ = process.communicate(
                input=stdin_text.encode("utf-8") if stdin_text is not None else None,
                timeout=self.config.timeout_s,
            )
            code: int | None = process.returncode
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, _ = process.communicate()
            code = None
        limit = self.config.max_output_bytes
        return out[-limit:].decode("utf-8", errors="replace"), code
