"""The ``PATH.py:NAME`` loader: import a desk function (or a factory) from a file.

Errors name the file and the attribute: a missing file or function is ``BadInput``
(exit 65), a spec without ``:`` is a ``UsageError`` (exit 2).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from assay.errors import BadInput, UsageError


def load_target(spec: str, *, what: str = "function") -> Any:
    """Return attribute NAME of the Python file PATH given as ``PATH.py:NAME``."""
    path_text, sep, name = spec.rpartition(":")
    if not sep or not path_text or not name:
        raise UsageError(f"{spec!r} is not PATH.py:{what.upper()}")
    path = Path(path_text).resolve()
    if not path.is_file():
        raise BadInput(f"{path_text}: no such file (from {spec!r})", file=path_text)
    module_name = f"assay_target_{abs(hash(str(path)))}"
    module = sys.modules.get(module_name)
    if module is None:
        loader_spec = importlib.util.spec_from_file_location(module_name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise BadInput(f"{path_text}: cannot be imported as Python", file=path_text)
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[module_name] = module
        sys.path.insert(0, str(path.parent))
        try:
            loader_spec.loader.exec_module(module)
        except SyntaxError as exc:
            del sys.modules[module_name]
            raise BadInput(f"{path_text} line {exc.lineno}: {exc.msg}", file=path_text) from None
        finally:
            sys.path.remove(str(path.parent))
    target = getattr(module, name, None)
    if target is None:
        raise BadInput(f"{path_text}: no {what} named {name!r}", file=path_text, name=name)
    if not callable(target):
        raise BadInput(f"{path_text}: {name!r} is not callable", file=path_text, name=name)
    return target
