"""Guardrails: checks a run makes of each tool call's arguments (before any approval), each
tool's result and the final answer, each of which passes, fixes the value or trips.

A `Guard` is part of the loop, checked by states of its definition (`machines/guarded.toml`,
`machines/guarded_approval.toml`: a `check_call` state between choosing a call and making it,
or giving the answer; a `check_result` state between a call and its observation), so it is
drawn on the diagram, and `forge check --require guarded-side-effects` proves that no
side-effecting call reaches a tool without passing a guard that covers it.

`check(value)` is any function (one that asks a model too): it returns None or True (the
value passes), `Fix(value)` (the run goes on with the changed value, recorded in the trace),
or `Trip(reason)` / False (the value is refused). A tripped guard either ends the run in
`guardrail_tripped`, its own terminal state, with the guard, the value and the reason in
the trace (`on_trip="stop"`, the default), or tells the policy, which replans
(`on_trip="replan"`: the call is not made, its observation a `retryable_error` naming the
guard and the reason). Every check is a call of the run's journal (kind `guard`): a replay,
a fork or a cassette answers it from the journal, never calling the guard again.

Raises (when a `Guard` is made):
    UsageError: a blank name, a `check` that is not callable, an unknown `on` or `on_trip`,
        or `tools` given to an answer guard.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from forge.errors import ForgeError, UsageError, WrongType

__all__ = ["GUARDED", "Fix", "Guard", "GuardTripped", "Trip"]

GUARDED = ("input", "arguments", "result", "answer")
"""What a guard may check: the run's input (its goal), a call's arguments, a call's result,
the final answer."""


@dataclass(frozen=True, slots=True)
class Fix:
    """A guard's verdict: go on with `value` in place of what it was given (`why` says why,
    in the trace)."""

    value: Any
    why: str = ""


@dataclass(frozen=True, slots=True)
class Trip:
    """A guard's verdict: the value is refused, for `reason`."""

    reason: str


@dataclass(frozen=True, slots=True)
class Guard:
    """A check of `on` (`"input"`, the run's goal; `"arguments"`, `"result"` or `"answer"`)
    by `check(value)`; for arguments and results, of the calls of `tools` only (None: every
    tool)."""

    name: str
    check: Callable[[Any], Any]
    on: Literal["input", "arguments", "result", "answer"] = "arguments"
    tools: frozenset[str] | None = None
    on_trip: Literal["stop", "replan"] = "stop"
    doc: str = field(default="", compare=False)
    called: str = field(default="", compare=False, repr=False)
    """What the guard is called in errors (`guard 'limit'`)."""

    def __init__(self, name: str, check: Callable[[Any], Any],
                 on: Literal["input", "arguments", "result", "answer"] = "arguments",
                 *, tools: Iterable[str] | None = None, on_trip: Literal["stop", "replan"] = "stop", doc: str = "") -> None:
        if not isinstance(name, str) or not name.strip():
            raise UsageError(f"a guard's name is a non-blank string, got {name!r}")
        if not callable(check):
            raise UsageError(f"guard {name!r}: check must be callable as check(value), got {check!r}")
        if on not in GUARDED:
            raise UsageError(f"guard {name!r}: on must be one of {', '.join(GUARDED)}, got {on!r}")
        if on_trip not in ("stop", "replan"):
            raise UsageError(f"guard {name!r}: on_trip must be 'stop' or 'replan', got {on_trip!r}")
        if tools is not None and on == "answer":
            raise UsageError(f"guard {name!r}: an answer guard checks the final answer, which no tool gives: drop tools")
        if isinstance(tools, str):
            raise UsageError(f"guard {name!r}: tools is a list of tool names, got the string {tools!r}")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "check", check)
        object.__setattr__(self, "on", on)
        object.__setattr__(self, "tools", None if tools is None else frozenset(tools))
        object.__setattr__(self, "on_trip", on_trip)
        object.__setattr__(self, "doc", doc or (getattr(check, "__doc__", None) or "").strip().split("\n")[0])
        object.__setattr__(self, "called", f"guard {name!r}")

    def covers(self, on: str, tool: str | None) -> bool:
        """Whether this guard checks `on` of a call of `tool` (or the answer)."""
        return self.on == on and (self.tools is None or tool in self.tools)


class GuardTripped(ForgeError, ValueError):
    """A guard refused a value: `guard` its name, `reason` why. The error of a run that ends
    in `guardrail_tripped`, and the payload of the observation a replanning guard records."""

    def __init__(self, guard: str, reason: str, tool: str | None = None) -> None:
        about = f" of {tool}" if tool else ""
        super().__init__(f"guard {guard!r} refused the {'call' if tool else 'value'}{about}: {reason}")
        self.guard, self.reason, self.tool = guard, reason, tool


def judged(guard: Guard, value: Any) -> Any:
    """`guard.check(value)`'s verdict as the journal keeps it: `{"pass": true}`,
    `{"fix": VALUE, "why": TEXT}` or `{"trip": REASON}` (awaitable, for an `async def`
    check, which `arun` awaits).

    Raises:
        WrongType: (a TypeError) the check returned anything else.
        Whatever the check raises (the engine ends the run in fatal_error, naming it).
    """
    verdict = guard.check(value)
    if verdict is None:
        return PASSED
    if hasattr(verdict, "__await__"):
        return _awaited(guard, verdict)
    return _verdict(guard, verdict)


PASSED: Mapping[str, Any] = {"pass": True}
"""The verdict of every check that passes (one value, read only: a passing check makes
nothing; plain data, as the journal writes it)."""


async def _awaited(guard: Guard, verdict: Any) -> Mapping[str, Any]:
    return _verdict(guard, await verdict)


def _verdict(guard: Guard, verdict: Any) -> Mapping[str, Any]:
    if verdict is None or verdict is True:
        return PASSED
    if verdict is False:
        return {"trip": f"{guard.name} said no"}
    if isinstance(verdict, Fix):
        return {"fix": verdict.value, "why": verdict.why}
    if isinstance(verdict, Trip):
        return {"trip": str(verdict.reason)}
    raise WrongType(f"guard {guard.name!r} returned {verdict!r}; a check returns None or True (pass), "
                    "Fix(value) or Trip(reason) (or False)")
