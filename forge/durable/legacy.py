"""Reading what forge 0.1.0 stored with pickle, without running any code a row names.

forge 0.1.0 kept a run's journal, its side effects' values and (through DBOS's default
serializer) its inputs, events, answers and result as pickles. Unpickling runs whatever
the bytes name, so a row written by anyone with access to the database would run code in
every process that reads it, and reading one needed the user's modules. Today's forge
writes the wire form (`forge.records.wire`) only; what an earlier release wrote is read
here, by an unpickler that calls nothing but a short list of forge's own value classes
and plain Python ones (`_ALLOWED`). Any other class a pickle names (a typed answer's
pydantic model, a tool's own exception) is never imported or called: it is read as a
stand-in holding its arguments and state, then turned into what the wire form reads back
for it — an exception into a recorded error (`forge.records.recorded`; its kind is its
class's when that class is loaded in this process already), a model or dataclass into its
JSON (the user's class again where it is loaded, as `forge.records.wire` revives one).

`read_legacy(data)` reads one pickle; `forge.durable.serializer` reads DBOS's rows marked
`py_pickle` with it.
"""

from __future__ import annotations

import builtins
import dataclasses
import importlib
import io
import pickle
import sys
from typing import Any

from forge.moved import renamed
from forge.records.recorded import class_kind, error_from

__all__ = ["is_legacy", "read_legacy"]

_ALLOWED: dict[tuple[str, str], str] = {
    ("builtins", "set"): "builtins", ("builtins", "frozenset"): "builtins", ("builtins", "complex"): "builtins",
    ("builtins", "bytearray"): "builtins", ("builtins", "slice"): "builtins", ("builtins", "range"): "builtins",
    ("builtins", "object"): "builtins",
    ("copyreg", "_reconstructor"): "copyreg", ("collections", "OrderedDict"): "collections",
    ("collections", "deque"): "collections",
    ("datetime", "datetime"): "datetime", ("datetime", "date"): "datetime", ("datetime", "time"): "datetime",
    ("datetime", "timedelta"): "datetime", ("datetime", "timezone"): "datetime", ("decimal", "Decimal"): "decimal",
    ("forge.agent.observations", "LoopState"): "forge", ("forge.agent.observations", "Observation"): "forge",
    ("forge.policy", "Intent"): "forge", ("forge.policy", "Finish"): "forge", ("forge.policy", "Ask"): "forge",
    ("forge.records.journal", "JournalEntry"): "forge", ("forge.records.journal", "DecidedAsCode"): "forge",
    ("forge.records.journal", "ForkOrigin"): "forge", ("forge.records.recorded", "error_from"): "forge",
    ("forge.errors", "_rebuilt"): "forge",
}
"""The globals a legacy pickle may name and get: forge's value classes, the one function
each of forge's errors pickles through, and plain Python values. A builtin exception
class, and any exception class of forge's own, is allowed as well (made with its args)."""


class _Foreign:
    """What a class outside `_ALLOWED` is read as: its name, the arguments it was made with
    and the state it was given; nothing of it is imported or called."""

    _type = "?"
    made_with: tuple[Any, ...] = ()
    state: Any = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.made_with, self.state = args, None

    def __setstate__(self, state: Any) -> None:
        self.state = state


def _foreign(module: str, name: str) -> type[_Foreign]:
    return type(name, (_Foreign,), {"_type": f"{module}:{name}", "__module__": "forge.durable.legacy"})


class _Reader(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        module = renamed(module)  # a pickle names a moved module by its old name
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        if module == "builtins" or module == "forge" or module.startswith("forge."):  # never the user's code
            try:
                found = vars(builtins if module == "builtins" else importlib.import_module(module)).get(name)
            except ImportError:
                found = None
            if isinstance(found, type) and issubclass(found, BaseException):
                return found
        return _foreign(module, name)


def is_legacy(data: bytes) -> bool:
    """Whether stored bytes are a pickle (forge 0.1.0) rather than the wire form's JSON."""
    return data[:1] == b"\x80"


def read_legacy(data: bytes) -> Any:
    """The value a forge 0.1.0 pickle holds, read as the module says (no code it names runs).

    Raises:
        pickle.UnpicklingError: `data` is not a pickle.
    """
    return _plain(_Reader(io.BytesIO(data)).load())


def _plain(value: Any, error: bool = False) -> Any:
    """`value` with every stand-in made into what the wire form reads back for it; `error`:
    it is held where an exception belongs (a journal entry's error)."""
    from forge.agent.observations import LoopState, Observation
    from forge.policy import Finish, Intent
    from forge.records.journal import JournalEntry

    if isinstance(value, _Foreign):
        return _error_of(value) if error or _is_exception(value) else _typed_of(value)
    if isinstance(value, JournalEntry):
        return dataclasses.replace(value, identity=_plain(value.identity), value=_plain(value.value),
                                   error=None if value.error is None else _plain(value.error, True))
    if isinstance(value, LoopState):
        observations = [dataclasses.replace(o, payload=_plain(o.payload, o.status != "ok")) for o in value.observations]
        return LoopState.restored(observations, list(value.action_history), value.terminal,
                                  _plain(list(value.messages)), value.turn_start)
    if isinstance(value, Observation):
        return dataclasses.replace(value, payload=_plain(value.payload, value.status != "ok"))
    if isinstance(value, Finish):
        return Finish(_plain(value.answer))
    if isinstance(value, Intent):
        return Intent(value.capabilities, _plain(dict(value.arguments)), value.idempotency_key, tool=value.tool)
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_plain(item) for item in value)
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def _loaded(stand_in: _Foreign) -> type | None:
    module, _, name = type(stand_in)._type.partition(":")
    found = vars(sys.modules[module]).get(name) if module in sys.modules else None
    return found if isinstance(found, type) else None


def _is_exception(stand_in: _Foreign) -> bool:
    kind = _loaded(stand_in)
    return kind is not None and issubclass(kind, BaseException)


def _error_of(stand_in: _Foreign) -> BaseException:
    """A recorded error for an exception of a class outside `_ALLOWED` (its kind the class's
    when it is loaded here, else `error`)."""
    kind = _loaded(stand_in)
    args = [_plain(arg) for arg in (stand_in.made_with or getattr(stand_in, "args", ()))]
    attributes = stand_in.state if isinstance(stand_in.state, dict) else {}
    from forge.records.wire import json_problem

    return error_from({
        "type": type(stand_in)._type,
        "kind": class_kind(kind) if kind is not None and issubclass(kind, BaseException) else "error",
        "message": str(args[0]) if len(args) == 1 else str(tuple(args)) if args else "",
        "args": [arg if json_problem(arg) is None else repr(arg) for arg in args],
        "attributes": {k: v for k, v in attributes.items() if not k.startswith("_") and json_problem(v) is None}})


def _typed_of(stand_in: _Foreign) -> Any:
    """What the wire form reads back for a model's or dataclass's stored fields."""
    from forge.records.wire import decode

    state = stand_in.state
    if isinstance(state, dict) and isinstance(state.get("__dict__"), dict):  # a pydantic model's
        fields = state["__dict__"]
    elif isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict):  # slots: (dict, slots)
        fields = {**(state[0] or {}), **state[1]}
    elif isinstance(state, dict):
        fields = state
    else:
        fields = {"args": list(stand_in.made_with)}
    return decode({"$forge": "typed", "type": type(stand_in)._type, "schema": None, "value": _plain(fields)})
