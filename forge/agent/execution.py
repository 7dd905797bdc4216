"""Stage 3, execute: argument contracts checked before any handler runs.

Passing undeclared arguments through could hand a tool `sudo=True`; filtering them silently
would hide the caller's mistake. So every violation is refused before the handler is called.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ArgumentContractError", "ExecutionResult", "ToolContract", "execute_tool"]


@dataclass(frozen=True, slots=True)
class ToolContract:
    """The arguments a tool's handler accepts: all of `required`, any of `optional`."""

    name: str
    required: frozenset[str]
    handler: Callable[..., Any]
    optional: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class ExecutionResult:
    """A handler's return value, tagged with the tool that produced it."""

    tool_name: str
    value: Any


class ArgumentContractError(ValueError):
    """The arguments break the tool's contract; the handler was not called.

    `missing` and `unexpected` are sorted tuples naming every offending argument.
    """

    def __init__(self, tool_name: str, missing: tuple[str, ...], unexpected: tuple[str, ...]) -> None:
        parts = []
        if missing:
            parts.append(f"missing: {', '.join(missing)}")
        if unexpected:
            parts.append(f"unexpected: {', '.join(unexpected)}")
        super().__init__(f"arguments for {tool_name} break its contract; {'; '.join(parts)}")
        self.tool_name = tool_name
        self.missing = missing
        self.unexpected = unexpected


def execute_tool(contract: ToolContract, arguments: Mapping[str, Any]) -> ExecutionResult:
    """Call `contract.handler(**arguments)` once the arguments fit the contract.

    Both missing (required - given) and unexpected (given - required - optional) arguments
    are computed before the handler is considered; nothing is ever filtered out.

    Raises:
        ArgumentContractError: (a ValueError) any argument is missing or unexpected; its
            message names each one ("missing: …", "unexpected: …").
        Whatever the handler raises, unchanged.
    """
    given = set(arguments)
    missing = tuple(sorted(contract.required - given))
    unexpected = tuple(sorted(given - contract.required - contract.optional))
    if missing or unexpected:
        raise ArgumentContractError(contract.name, missing, unexpected)
    return ExecutionResult(contract.name, contract.handler(**arguments))
