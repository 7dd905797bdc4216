"""The old names of forge's moved modules, importable still, with a DeprecationWarning.

A module moved to the folder it belongs in (so that the folders import one way, in
layers: `tests/test_layers.py`) leaves no file behind at its old place: its old dotted
name is a line of `MOVED`, and `install()` (run when `forge` is imported) puts a finder on
`sys.meta_path` that answers an import of an old name with a module standing for the new
one. Every name read from it is the new module's own object (`forge.llm.ChatPolicy is
forge.models.chat.ChatPolicy`), so code, `from … import …` and a pickle that name the old
path go on working; the import says where the module is now.

This module imports nothing of forge's: the finder imports a new module by its name only
when an old one is asked for.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

__all__ = ["MOVED", "install", "renamed"]

MOVED: dict[str, str] = {
    "forge.llm": "forge.models.chat",
    "forge.fallback": "forge.models.fallback",
    "forge.compaction": "forge.models.compaction",
    "forge.pricing": "forge.records.pricing",
    "forge.usage": "forge.records.usage",
    "forge.debug.scenario": "forge.scenario",
    "forge.models.pricing": "forge.records.pricing",
    "forge.models.usage": "forge.records.usage",
    "forge.child": "forge.machine.child",
    "forge.stream": "forge.running.stream",
    "forge.replaying": "forge.running.replaying",
    "forge.machine.definition": "forge.records.definition",
    "forge.machine.journal": "forge.records.journal",
    "forge.machine.effects": "forge.records.effects",
    "forge.machine.answers": "forge.records.answers",
    "forge.machine.columns": "forge.records.columns",
    "forge.machine.recorded": "forge.records.recorded",
    "forge.machine.wire": "forge.records.wire",
    "forge.machine.abstract": "forge.records.abstract",
    "forge.machine.outcome": "forge.records.outcome",
    "forge.machine.trace": "forge.records.trace",
    "forge.machine.details": "forge.records.details",
    "forge.machine.tally": "forge.records.tally",
}
"""Each moved module's old dotted name, and its name now."""


def renamed(module: str) -> str:
    """A module's name now, given its name then (a name that did not move, as it is): what
    a stored value naming its class by module reads it by."""
    return MOVED.get(module, module)


class _OldNames:
    """Finds the old names in `MOVED`, and makes each the module standing for its new one
    (a finder and loader of `importlib`'s protocols)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, cast("Loader", self))

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        old = module.__name__
        new = MOVED[old]
        warnings.warn(f"{old} is {new} now: import that (the old name goes in a later release)",
                      DeprecationWarning, stacklevel=2)  # the line importing it (importlib's frames are skipped)
        now = importlib.import_module(new)

        def attribute(name: str) -> Any:
            return getattr(now, name)

        module.__dict__.update(__getattr__=attribute, __dir__=lambda: sorted(dir(now)),
                               __doc__=f"`{old}` is `{new}` now.", __all__=list(getattr(now, "__all__", ())))


_FINDER = _OldNames()


def install() -> None:
    """Put the finder of old names on `sys.meta_path` (once)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)
