"""The ``command`` adapter: an external agent CLI run as one model step.

The conversation is rendered as plain text and handed to the program on stdin (or in a
file whose path replaces an argv element that is exactly ``{prompt_file}``). The argv comes
from the manifest and is executed directly, never through a shell, in the work tree the
desk binds (``workdir``), in the desk's sandbox (``assay.sandbox``: the work tree the only
writable path, the prompt file read-only), with a small environment plus the variables the
manifest names (never a credential-named one).
The program's output becomes the assistant message; the files it changed are committed by
the desk's next recorded step.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from assay.errors import BadInput, Failed
from assay.models.base import Message, ModelReply, ToolSpec, Usage, estimate_tokens
from assay.models.config import CommandConfig
from assay.sandbox import SandboxSpec, run_sandboxed, sandbox_environment

PROMPT_FILE = "{prompt_file}"


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

    def __init__(
        self,
        config: CommandConfig,
        *,
        workdir: Path,
        sandbox: SandboxSpec | None = None,
        program_dir: Path | None = None,
    ) -> None:
        self.config = config
        self.context_window = config.context_window
        self.workdir = workdir
        spec = SandboxSpec() if sandbox is None else sandbox
        # The program's own files (a script beside the manifest) are readable, not writable.
        self.sandbox = spec.with_read_only(program_dir.resolve()) if program_dir else spec

    def environment(self) -> dict[str, str]:
        """What the program sees: a few harmless variables plus the declared ones."""
        return sandbox_environment(self.config.env)

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
            output, code = self._execute(argv, stdin_text, Path(scratch))
        if code is None:
            raise Failed(f"agent command {argv[0]} timed out after {self.config.timeout_s:g} s")
        if code != 0:
            raise Failed(f"agent command {argv[0]} exited {code}: {output[-500:]}")
        message: Message = {"role": "assistant", "content": output}
        usage = Usage(estimate_tokens(messages), len(output) // 4, 0.0)
        return ModelReply(message=message, usage=usage, model=argv[0], stop="stop")

    def _execute(
        self, argv: list[str], stdin_text: str | None, scratch: Path
    ) -> tuple[str, int | None]:
        result = run_sandboxed(
            argv,
            cwd=self.workdir,
            env=self.environment(),
            spec=self.sandbox.with_read_only(scratch),
            timeout_s=self.config.timeout_s,
            max_output_bytes=2 * self.config.max_output_bytes,
            stdin=stdin_text.encode("utf-8") if stdin_text is not None else None,
        )
        if not result.started:
            raise BadInput(f"command model: cannot start {argv[0]!r}: {result.output().strip()}")
        code = None if result.timed_out else result.exit
        return result.last(self.config.max_output_bytes), code
