"""The wire form: forge's values as JSON, and back, wherever forge writes a run's values down
(a trace file's journal lines, the runs' database, a request's state).

Reading the wire form never runs code: it imports nothing and calls nothing a row could
name, so any process reads any run (`forge ui`, `forge runs`, another machine's worker)
without the user's modules. A value is written as itself when JSON holds it exactly
(tuples become lists); otherwise as an object marked `"$forge"`:

- `{"$forge": "intent", "tool": …, "capabilities": […], "arguments": {…}, "idempotency_key": …}`,
  `{"$forge": "finish", "answer": …}`, `{"$forge": "ask", "question": …}`: a policy's
  decisions (a list of intents: calls asked at once);
- `{"$forge": "error", "type": "module:QualName", "kind": …, "message": …, "args": […],
  "attributes": {…}}`: an exception, read back as `forge.records.recorded` rebuilds one;
- `{"$forge": "typed", "type": "module:QualName", "schema": {…}, "value": …}`: an instance
  of a pydantic model or a dataclass (a typed answer, `AgentLoop(output=...)`), its JSON and
  its class's JSON Schema. Read back as the user's class again only where that class is
  loaded already (the user's process: a worker, the program that runs the loop), by
  validating `value`; elsewhere as `value` itself, plain JSON;
- `{"$forge": "state", "observations": [{"sequence": …, "tool": …, "status": …, "payload": …,
  "repeat_of": …}], "actions": […], "terminal": …, "messages": […], "turn_start": …}`: a
  `LoopState`;
- `{"$codec": …}`: a value the loop's codec wrote (`AgentLoop(codec=...)`), read back by the
  same codec, and left as it is where there is none (and written again as it is).

Any other value (a set, a datetime, an object) has no wire form: `encode` raises
`NoWireForm` naming why, and a codec is the way to store it.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable, Mapping
from typing import Any

from forge.agent.observations import OBSERVATION_STATUSES, LoopState, Observation
from forge.errors import ForgeError, UsageError
from forge.records.recorded import error_from, error_json

__all__ = ["MARKERS", "NoWireForm", "decode", "encode", "error_form", "json_problem"]

MARKERS = ("$forge", "$codec")
"""The keys the wire form reserves: a plain dict holding one is not written as it is."""


class NoWireForm(ForgeError, TypeError):
    """A value has no wire form (see the module) and no codec wrote it. `why` says what it is."""

    def __init__(self, value: Any, why: str) -> None:
        super().__init__(f"a {type(value).__name__}, {why}")
        self.value, self.why = value, why


def json_problem(value: Any) -> str | None:
    """Why `value` is not plain JSON as it is, or None when it is (tuples become lists)."""
    if value is None or isinstance(value, (str, bool, int)):
        return None
    if isinstance(value, float):
        return None if value == value and value not in (float("inf"), float("-inf")) else "a float JSON cannot hold"
    if isinstance(value, (list, tuple)):
        return next((p for p in map(json_problem, value) if p is not None), None)
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            return "a dict with keys that are not strings"
        if any(key in MARKERS for key in value):
            return "a dict with a key that the wire form reserves ($forge, $codec)"
        return next((p for p in map(json_problem, value.values()) if p is not None), None)
    return "which JSON cannot hold"


def encode(value: Any, codec: Any = None) -> Any:
    """`value` in the wire form (see the module): JSON data. A value that is neither plain
    JSON nor one of forge's own is given to `codec` (a `JournalCodec`) first, when there is
    one; a TypeError from it leaves the value to the typed form.

    Raises:
        NoWireForm: `value`, or a value in it, has no wire form and no codec wrote it.
    """
    if json_problem(value) is None:
        return _plain(value)
    if isinstance(value, dict) and len(value) == 1 and "$codec" in value:  # read without its codec: as stored
        return value
    own = _own_form(value, codec)
    if own is not None:
        return own
    refusal = None
    if codec is not None and not _holds_forge_values(value):
        try:
            return {"$codec": codec.encode(value)}
        except TypeError as refused:
            refusal = f"which the codec refused ({refused})"
    if isinstance(value, (list, tuple)):
        return [encode(item, codec) for item in value]
    if isinstance(value, dict) and all(isinstance(key, str) for key in value) and not any(k in MARKERS for k in value):
        return {key: encode(item, codec) for key, item in value.items()}
    typed = _typed(value)
    if typed is not None:
        return typed
    raise NoWireForm(value, refusal or json_problem(value) or "which JSON cannot hold")


def _own_form(value: Any, codec: Any) -> dict[str, Any] | None:
    """The form of one of forge's own values (a decision, an error, a state), or None."""
    from forge.policy import Ask, Finish, Intent

    if isinstance(value, Intent):
        return {"$forge": "intent", "capabilities": sorted(value.capabilities),
                "arguments": encode(dict(value.arguments), codec), "idempotency_key": value.idempotency_key,
                "tool": value.tool}
    if isinstance(value, Finish):
        return {"$forge": "finish", "answer": encode(value.answer, codec)}
    if isinstance(value, Ask):
        return {"$forge": "ask", "question": value.question}
    if isinstance(value, BaseException):
        return {"$forge": "error", **error_form(value)}
    if isinstance(value, LoopState):
        return _state(value, codec)
    return None


def error_form(error: BaseException) -> dict[str, Any]:
    """`error`'s recorded form (`forge.records.recorded`), its plain JSON attributes kept."""
    return error_json(error, lambda value: json_problem(value) is None)


def _holds_forge_values(value: Any) -> bool:
    """Whether a list holds forge's own values (calls asked at once): written one by one."""
    from forge.policy import Ask, Finish, Intent

    return isinstance(value, (list, tuple)) and any(
        isinstance(item, (Intent, Finish, Ask, BaseException, LoopState)) for item in value)


def _plain(value: Any) -> Any:
    """Plain JSON `value` with its tuples made lists (a value with none is returned as it is)."""
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    if isinstance(value, list):
        return value if not any(isinstance(item, (tuple, list, dict)) for item in value) else [_plain(i) for i in value]
    if isinstance(value, dict):
        return value if not any(isinstance(item, (tuple, list, dict)) for item in value.values()) else \
            {key: _plain(item) for key, item in value.items()}
    return value


def _state(state: LoopState, codec: Any) -> dict[str, Any]:
    return {"$forge": "state",
            "observations": [{"sequence": o.sequence, "tool": o.tool_name, "status": o.status,
                              "payload": encode(o.payload, codec), "repeat_of": o.repeat_of}
                             for o in state.observations],
            "actions": list(state.action_history), "terminal": state.terminal,
            "messages": encode(list(state.messages), codec), "turn_start": state.turn_start}


def _is_model_class(kind: type) -> bool:
    """Whether `kind` is a pydantic model (found without importing pydantic)."""
    return any(base.__name__ == "BaseModel" and base.__module__ == "pydantic.main" for base in kind.__mro__)


def _typed(value: Any) -> dict[str, Any] | None:
    """The typed form of a pydantic model or dataclass instance, or None for another value."""
    kind = type(value)
    if _is_model_class(kind):
        data = value.model_dump(mode="json")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        try:
            from pydantic_core import to_jsonable_python
        except ImportError:
            data = dataclasses.asdict(value)
        else:
            data = to_jsonable_python(value)
        if json_problem(data) is not None:
            return None
    else:
        return None
    return {"$forge": "typed", "type": f"{kind.__module__}:{kind.__qualname__}", "schema": _schema(kind),  # type: ignore[arg-type]
            "value": data}


@functools.lru_cache(maxsize=256)
def _schema(kind: type) -> dict[str, Any] | None:
    """The JSON Schema of a typed value's class (None without pydantic, for a dataclass)."""
    try:
        from pydantic import TypeAdapter
    except ImportError:
        return None
    try:
        return TypeAdapter(kind).json_schema()
    except Exception:  # a class pydantic makes no schema of: its values are still stored
        return None


def decode(data: Any, codec: Any = None, *, needs_codec: bool = False) -> Any:
    """The value `data` (wire form) holds; see the module for what each form becomes.
    Imports nothing and runs no code a row names. A value a codec wrote is left as it is
    without `codec`, unless `needs_codec` (a replay must have every value back).

    Raises:
        UsageError: a `$forge` form that is not one of the module's, or one missing a field;
            with `needs_codec`, a value a codec wrote and no codec.
    """
    if isinstance(data, list):
        return [decode(item, codec, needs_codec=needs_codec) for item in data] \
            if any(isinstance(i, (dict, list)) for i in data) else data
    if not isinstance(data, dict):
        return data
    if "$codec" in data:
        if codec is not None:
            return codec.decode(data["$codec"])
        if needs_codec:
            raise UsageError("the journal holds a value written by a codec; pass the loop's codec to read it")
        return data
    marker = data.get("$forge")
    if marker is None:
        return {key: decode(item, codec, needs_codec=needs_codec) for key, item in data.items()} if \
            any(isinstance(i, (dict, list)) for i in data.values()) else data
    reader = _READERS.get(marker)
    if reader is None:
        raise UsageError(f"unknown $forge value {marker!r} (expected one of {', '.join(sorted(_READERS))})")
    try:
        return reader(data, lambda inner: decode(inner, codec, needs_codec=needs_codec))
    except KeyError as missing:
        raise UsageError(f"a {marker} value is missing {missing}") from None


def _intent(data: Mapping[str, Any], read: Callable[[Any], Any]) -> Any:
    from forge.policy import Intent

    return Intent(frozenset(data["capabilities"]), read(data["arguments"]), data.get("idempotency_key"),
                  tool=data.get("tool"))


def _finish(data: Mapping[str, Any], read: Callable[[Any], Any]) -> Any:
    from forge.policy import Finish

    return Finish(read(data["answer"]))


def _ask(data: Mapping[str, Any], read: Callable[[Any], Any]) -> Any:
    from forge.policy import Ask

    return Ask(data["question"])


def _error(data: Mapping[str, Any], read: Callable[[Any], Any]) -> BaseException:
    return error_from({key: value for key, value in data.items() if key != "$forge"})


def _loop_state(data: Mapping[str, Any], read: Callable[[Any], Any]) -> LoopState:
    observations = []
    for seen in data["observations"]:
        if seen["status"] not in OBSERVATION_STATUSES:
            raise UsageError(f"an observation's status must be one of {', '.join(sorted(OBSERVATION_STATUSES))}, "
                             f"got {seen['status']!r}")
        observations.append(Observation(int(seen["sequence"]), str(seen["tool"]), seen["status"],
                                        read(seen["payload"]), seen.get("repeat_of")))
    return LoopState.restored(observations, [str(a) for a in data["actions"]], bool(data["terminal"]),
                              list(read(data.get("messages", []))), int(data.get("turn_start", 0)))


def _typed_value(data: Mapping[str, Any], read: Callable[[Any], Any]) -> Any:
    """The user's class again when it is loaded here (never imported), else the JSON value."""
    value = data["value"]
    kind = _loaded_class(str(data["type"]))
    try:
        if kind is not None and _is_model_class(kind):
            return kind.model_validate(value)  # type: ignore[attr-defined]
        if kind is not None and dataclasses.is_dataclass(kind):
            from pydantic import TypeAdapter

            return TypeAdapter(kind).validate_python(value)
    except Exception:  # the class changed since the value was stored (or pydantic is away): the value as stored
        return value
    return value


def _loaded_class(name: str) -> type | None:
    """The class `module:QualName` names, when its module is loaded in this process already."""
    module_name, _, qualname = name.partition(":")
    found: Any = sys.modules.get(module_name)
    for part in qualname.split(".") if qualname else ():
        found = vars(found).get(part) if hasattr(found, "__dict__") else None  # no module __getattr__ runs
    return found if isinstance(found, type) else None


_READERS: dict[str, Callable[[Mapping[str, Any], Callable[[Any], Any]], Any]] = {
    "intent": _intent, "finish": _finish, "ask": _ask, "error": _error, "state": _loop_state, "typed": _typed_value}
