"""The root of forge's own errors, so that a program (and forge's command line) can tell
forge's refusals apart from its own bugs: `except ForgeError` catches every error forge
raises on purpose, and each also keeps its standard base (ValueError, RuntimeError, …).

Errors a tool raises to tell the loop what happened (`TransientToolError`,
`PermanentToolError`, `ToolError`) are not refusals: they are signals from a tool to the loop,
with a root of their own, `ToolSignal`, so that `except ForgeError` means "forge refused".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["ForgeError", "MissingFile", "RunNotFound", "ToolSignal", "UsageError", "WrongType", "refuse_unknown"]


class ForgeError(Exception):
    """Raised by forge on purpose: bad input, a refused definition, a run that cannot go on.

    Every forge error pickles as it is (its message and attributes), whatever its
    `__init__` takes: a program may pickle a result (forge's own stores write errors as
    JSON, `forge.records.wire`, and read forge 0.1.0's pickles, `forge.durable.legacy`)."""

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuilt, (type(self), self.args, dict(self.__dict__))


def _rebuilt(kind: type[ForgeError], args: tuple[Any, ...], attributes: dict[str, Any]) -> ForgeError:
    """A forge error from what `ForgeError.__reduce__` kept, without calling its `__init__`."""
    error = kind.__new__(kind, *args)
    error.args = args
    error.__dict__.update(attributes)
    return error


class UsageError(ForgeError, ValueError):
    """A command or call was given something it cannot use (a format, a folder, a name);
    the message says what and how to fix it."""


class WrongType(ForgeError, TypeError):
    """A call was given, or user code returned, a value of a type forge cannot use; the
    message names what was expected."""


class MissingFile(ForgeError, FileNotFoundError):
    """A file or folder forge was pointed at does not exist (a definition, a definitions
    folder, a server it needs); the message says where it looked."""


class RunNotFound(ForgeError, LookupError):
    """No run with that id in the runs database (or this process)."""


class ToolSignal(Exception):
    """The root of what a tool raises to tell the loop how a call failed
    (`TransientToolError`, `PermanentToolError`, `ToolError`): not a refusal by forge."""


def refuse_unknown(given: Mapping[str, Any], options: Any, what: str, besides: Iterable[str] = ()) -> None:
    """Refuse a keyword of `given` that is not a key of the TypedDict `options` (the
    options a function passes on as they are): a misspelt option must not be lost, nor
    reach the function it is passed to as another argument.

    Raises:
        WrongType: naming it, and every option `what` takes (`besides` first)."""
    known = options.__annotations__
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise WrongType(f"unknown {what} option {', '.join(map(repr, unknown))}; the options are "
                        f"{', '.join([*besides, *known])}")
