"""The optional dependencies an extra brings (`pip install 'forge-fsm[EXTRA]'`): imported
when first needed, so `import forge` and every part that does not use them stay free of
them, and, when one is missing, an `ImportError` that says which extra brings it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["extra_module"]


def extra_module(name: str, extra: str, needed_by: str, package: str | None = None) -> ModuleType:
    """The module `name` (`"anthropic"`, `"google.genai"`), which the extra `extra` brings
    (its distribution `package`, by default the module's top name).

    Raises:
        ImportError: it is not installed; the message names `needed_by` (what needs it) and
            the two ways to install it.
    """
    try:
        return importlib.import_module(name)
    except ImportError as missing:
        raise ImportError(f"{needed_by} needs {name}: pip install 'forge-fsm[{extra}]' (or pip install "
                          f"{package or name.split('.')[0]})") from missing
