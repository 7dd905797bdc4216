"""Loading a user's Python file by its path, as `python path/to/file.py` would.

What `forge worker --loops`, `forge run` / `forge debug` scenarios and `--tools` /
`--stages` references take when they name a file rather than a module.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from forge.errors import UsageError

__all__ = ["import_file"]


def import_file(path: Path, what: str = "file") -> ModuleType:
    """Import the Python file at `path` as a module of its own; its folder goes first on
    `sys.path`, as `python path/to/file.py` puts it, so it imports the modules beside it.

    Raises:
        UsageError: no such file, or it cannot be loaded as Python, or it raised while it
            ran (the error named); `what` names the file in the message ("scenario file").
    """
    if not path.is_file():
        raise UsageError(f"no {what} {str(path)!r}")
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(f"forge_scenario_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot load {str(path)!r} as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import does: a dataclass of the file looks its module up there
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        del sys.modules[spec.name]
        raise UsageError(f"{what} {str(path)!r} failed to load: {type(error).__name__}: {error}") from error
    return module
