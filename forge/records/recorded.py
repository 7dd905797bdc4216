"""Errors as journals and cassettes write them, and as they are read back without running
anything.

A recorded error is `{"type": "module:QualName", "kind": …, "message": …, "args": […],
"attributes": {…}}`. `kind` says how the loop treats it, whatever its class: `transient`
(a `TransientToolError`, retried), `permanent` (a `PermanentToolError`), `tool_error` (a
`ToolError`, told to the policy) or `error` (anything else).

Reading a file must never run code, so reading one imports nothing: a recorded type is
rebuilt as its own class only when that class is a builtin exception or one of forge's
own classes already loaded; any other becomes a `RecordedError` of the recorded kind (a
subclass of `TransientToolError` for a transient one, and so on) whose class has the
recorded name, so it is retried, reported and shown as the original was. A replay then
rebuilds it as the class a tool declares (`Tool(..., raises=[QuotaExceeded])`) when the
names match (`revived`). A line written before `kind` was stored takes the kind of the
class it names when that class is rebuilt, and `error` otherwise.
"""

from __future__ import annotations

import builtins
import contextlib
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from forge.agent.retry import PermanentToolError, ToolError, TransientToolError
from forge.errors import UsageError
from forge.moved import renamed

__all__ = ["ERROR_KINDS", "RecordedError", "class_kind", "error_from", "error_json", "error_kind", "revived",
           "type_name"]

ERROR_KINDS = ("transient", "permanent", "tool_error", "error")
_KIND_BASES: dict[str, type[BaseException]] = {
    "transient": TransientToolError, "permanent": PermanentToolError, "tool_error": ToolError, "error": Exception}


class RecordedError(Exception):
    """An error read from a file whose class is not rebuilt (see the module). `recorded` is
    its recorded form (type, kind, message, args, attributes); its class's `__name__` and
    `__qualname__` are the recorded ones, so it reads as the original did."""

    recorded: Mapping[str, Any]

    def __str__(self) -> str:
        message = getattr(self, "recorded", {}).get("message")
        return message if isinstance(message, str) else super().__str__()

    def __reduce__(self) -> tuple[Any, ...]:  # its class is made at run time: pickled as what it records
        return error_from, (dict(self.recorded),)


def type_name(kind: type[BaseException]) -> str:
    """`module:QualName` of an error class (a `RecordedError`'s recorded one)."""
    if issubclass(kind, RecordedError) and kind.__dict__.get("_recorded_type"):
        return str(kind.__dict__["_recorded_type"])
    return f"{kind.__module__}:{kind.__qualname__}"


def error_kind(error: BaseException) -> str:
    """How the loop treats `error`: one of `ERROR_KINDS`."""
    return class_kind(type(error))


def class_kind(kind: type[BaseException]) -> str:
    """How the loop treats errors of the class `kind`: one of `ERROR_KINDS`."""
    if issubclass(kind, TransientToolError):
        return "transient"
    if issubclass(kind, PermanentToolError):
        return "permanent"
    if issubclass(kind, ToolError):
        return "tool_error"
    return "error"


def error_json(error: BaseException, plain: Any) -> dict[str, Any]:
    """The recorded form of `error`; `plain(value)` says whether a value is JSON as it is
    (else its repr is kept, and an attribute is dropped)."""
    attributes = {name: value for name, value in getattr(error, "__dict__", {}).items()
                  if not name.startswith("_") and name != "recorded" and plain(value)}
    return {"type": type_name(type(error)), "kind": error_kind(error), "message": str(error),
            "args": [arg if plain(arg) else repr(arg) for arg in error.args], "attributes": attributes}


def error_from(data: Any) -> BaseException:
    """The error `data` records (see the module for which class it gets). Imports nothing.

    Raises:
        UsageError: `data` is not an object with a string `type`, or its `kind` is not one of
            `ERROR_KINDS`.
    """
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        raise UsageError("'error' must be an object with a 'type'")
    kind = data.get("kind")
    if kind is not None and kind not in ERROR_KINDS:
        raise UsageError(f"'error.kind' must be one of {', '.join(ERROR_KINDS)}, got {kind!r}")
    known = _known_class(data["type"])
    if known is not None and (kind is None or class_kind(known) == kind):
        return _rebuilt(known, data)
    error = _rebuilt(_recorded_class(data["type"], kind or "error"), data)
    error.recorded = dict(data)  # type: ignore[attr-defined]
    return error


def revived(error: BaseException, classes: Iterable[type[BaseException]]) -> BaseException:
    """`error` as the one of `classes` its recorded type names (a tool's declared errors),
    or `error` itself."""
    if not isinstance(error, RecordedError):
        return error
    for kind in classes:
        if type_name(kind) == error.recorded.get("type"):
            return _rebuilt(kind, error.recorded)
    return error


def _rebuilt(kind: type[BaseException], data: Mapping[str, Any]) -> BaseException:
    """An instance of `kind` made without calling its `__init__`: the recorded args and
    attributes are set as they were."""
    error: BaseException = kind.__new__(kind)
    args = data.get("args")
    error.args = tuple(args) if isinstance(args, list) else ()
    attributes = data.get("attributes")
    for name, value in (attributes.items() if isinstance(attributes, dict) else ()):
        if isinstance(name, str) and not name.startswith("_"):
            with contextlib.suppress(AttributeError, TypeError):
                setattr(error, name, value)
    return error


_LOADED: dict[str, type[BaseException]] = {}
_RECORDED: dict[tuple[str, str], type[RecordedError]] = {}
_LOCK = threading.Lock()


def _known_class(name: str) -> type[BaseException] | None:
    """The builtin exception, or forge's own loaded error class, named `module:QualName` (a
    moved module by its old name too: `forge.moved`)."""
    module, _, qualname = name.partition(":")
    module = renamed(module)
    name = f"{module}:{qualname}"
    if module == "builtins":
        found = getattr(builtins, qualname, None)
        return found if isinstance(found, type) and issubclass(found, BaseException) else None
    if module != "forge" and not module.startswith("forge."):
        return None
    with _LOCK:
        if name not in _LOADED:
            _LOADED.update(_forge_classes())
        return _LOADED.get(name)


def _forge_classes() -> dict[str, type[BaseException]]:
    """forge's error classes loaded now, by `module:QualName` (found through their bases,
    so nothing is imported)."""
    found: dict[str, type[BaseException]] = {}
    pending: list[type[BaseException]] = [BaseException]
    while pending:
        kind = pending.pop()
        pending.extend(kind.__subclasses__())
        if (kind.__module__ == "forge" or kind.__module__.startswith("forge.")) and "<locals>" not in kind.__qualname__ \
                and not issubclass(kind, RecordedError):
            found[f"{kind.__module__}:{kind.__qualname__}"] = kind
    return found


def _recorded_class(name: str, kind: str) -> type[RecordedError]:
    """A `RecordedError` class of `kind` that reads as the recorded class `name` (made once
    per name and kind: only strings are taken from the file)."""
    with _LOCK:
        made = _RECORDED.get((name, kind))
        if made is None:
            module, _, qualname = name.partition(":")
            bases = (RecordedError,) if kind == "error" else (RecordedError, _KIND_BASES[kind])
            made = type(qualname.rsplit(".", 1)[-1] or "RecordedError", bases,
                        {"__module__": module or "forge.records.recorded", "__qualname__": qualname or "RecordedError",
                         "_recorded_type": name, "__init__": Exception.__init__, "retry_after": None})
            _RECORDED[(name, kind)] = made
        return made
