"""Tools as users declare them: name, capabilities, handler and argument contract."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from forge.agent.actions import ToolSpec
from forge.agent.execution import ToolContract

__all__ = ["Tool"]


@dataclass(frozen=True, slots=True, init=False)
class Tool:
    """A tool the loop may select and call.

    `capabilities` rank it during selection; `required` and `optional` are the handler's
    argument contract, checked before every call. A `side_effect` tool runs through the
    idempotency registry, so an identical repeated call returns the stored value instead of
    acting twice. Sets may be given as any iterable of strings; they are stored frozen.

    Raises:
        ValueError: blank name, no capabilities, a non-callable handler, or an argument that
            is both required and optional.
    """

    name: str
    capabilities: frozenset[str]
    handler: Callable[..., Any]
    required: frozenset[str] = frozenset()
    optional: frozenset[str] = frozenset()
    side_effect: bool = False

    def __init__(
        self,
        name: str,
        capabilities: Iterable[str],
        handler: Callable[..., Any],
        required: Iterable[str] = frozenset(),
        optional: Iterable[str] = frozenset(),
        side_effect: bool = False,
    ) -> None:
        object.__setattr__(self, "name", name)
        for field, value in (("capabilities", capabilities), ("required", required), ("optional", optional)):
            if isinstance(value, str):
                raise ValueError(f"tool {name!r}: {field} must be a set of strings, not a string")
            object.__setattr__(self, field, frozenset(value))
        object.__setattr__(self, "handler", handler)
        object.__setattr__(self, "side_effect", bool(side_effect))
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("tool name must be a non-empty string")
        if not self.capabilities:
            raise ValueError(f"tool {self.name!r} has no capabilities, so it can never be selected")
        if not callable(self.handler):
            raise ValueError(f"tool {self.name!r}: handler must be callable")
        both = self.required & self.optional
        if both:
            raise ValueError(
                f"tool {self.name!r}: arguments both required and optional: {', '.join(sorted(both))}"
            )

    @property
    def spec(self) -> ToolSpec:
        """What selection sees."""
        return ToolSpec(self.name, self.capabilities)

    @property
    def contract(self) -> ToolContract:
        """What execution checks."""
        return ToolContract(self.name, self.required, self.handler, self.optional)
