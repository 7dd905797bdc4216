"""The grouped values an `AgentLoop` takes beside its tools, policy and verify.

    AgentLoop(tools, policy, verify, max_steps=8,
              limits=Limits(repeat_limit=2, token_budget=10_000),
              retry=Retry(max_attempts=5, base_delay=0.5),
              hooks=Hooks(observers=[...], redact=mask))

Twenty-odd keyword arguments read as one flat list where nobody can see which belong
together; these four values say it: what bounds a run (`Limits`), how a transient tool error
is retried (`Retry`), where time and chance come from (`Clocks`, what a test replaces), and
what user code is told of or may change (`Hooks`). Each checks itself when made, naming the
field that is wrong, so a bad value is refused where it is written.

The flat names (`AgentLoop(repeat_limit=2)`, …) still work for one release, with a
`DeprecationWarning` naming the value they now belong to (`grouped`).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from forge.agent.retry import check_count, check_retry_options
from forge.errors import UsageError, WrongType

__all__ = ["FLAT_NAMES", "GROUPS", "Clocks", "Grouped", "Hooks", "Limits", "Retry", "grouped"]


@dataclass(frozen=True, slots=True)
class Limits:
    """What bounds a run besides `max_steps`: `repeat_limit` stops a run whose last call has
    been made that many times (identical calls count, or with `repeat_by="tool"` any use of
    the same tool); `token_budget` bounds the tokens of its model calls (`forge.records.usage`),
    `cost_budget` what they cost in US dollars, at the prices of `prices` (model name to
    `forge.records.pricing.Price`) or else genai-prices' public ones (`forge.records.pricing`);
    `max_parallel` bounds how many calls without side effects that the policy asked for at
    once run at the same time (1: one after another, each a step of its own, as before);
    `time_budget` bounds the run's working time in seconds (its time waiting for a person
    does not count, `forge.records.tally`): a run past it asks its policy nothing more and
    ends in `budget_exhausted`.

    Raises:
        ValueError: a limit that is not a whole number >= 1, or `repeat_by` other than
            "call" or "tool".
    """

    repeat_limit: int = 3
    repeat_by: str = "call"
    token_budget: int | None = None
    max_parallel: int = 4
    cost_budget: float | None = None
    prices: Mapping[str, Any] | None = None
    time_budget: float | None = None

    def __post_init__(self) -> None:
        check_count("repeat_limit", self.repeat_limit)
        check_count("max_parallel", self.max_parallel)
        if self.repeat_by not in ("call", "tool"):
            raise UsageError(f"repeat_by must be 'call' or 'tool', got {self.repeat_by!r}")
        if self.token_budget is not None:
            check_count("token_budget", self.token_budget)
        budget = self.cost_budget
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int | float) or not budget > 0
                                   or budget == float("inf")):
            raise UsageError(f"cost_budget is a number of US dollars above 0, got {budget!r}")
        seconds = self.time_budget
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int | float)
                                    or not 0 < seconds < float("inf")):
            raise UsageError(f"time_budget is a number of seconds above 0, got {seconds!r}")
        if self.prices is not None:
            from forge.records.pricing import Price

            if not isinstance(self.prices, Mapping) or not all(
                    isinstance(name, str) and isinstance(price, Price) for name, price in self.prices.items()):
                raise UsageError("prices maps model names to forge.records.pricing.Price(input=, output=) in USD per million "
                                 f"tokens, got {self.prices!r:.200}")


@dataclass(frozen=True, slots=True)
class Retry:
    """How a transient tool error is retried within one step, exactly as `run_with_retry`
    does: at most `max_attempts` attempts, waiting an exponential backoff from `base_delay`
    capped at `max_delay` (by default it does not wait), and none past `deadline` seconds.

    Raises:
        ValueError: `max_attempts` below 1, a negative or infinite delay, or a deadline
            that is not a finite number > 0.
    """

    max_attempts: int = 3
    base_delay: float = 0.0
    max_delay: float = 30.0
    deadline: float | None = None

    def __post_init__(self) -> None:
        check_retry_options(self.max_attempts, self.base_delay, self.max_delay, self.deadline)


@dataclass(frozen=True, slots=True)
class Clocks:
    """Where a run's time and chance come from: `clock` reads the time, `sleep` waits under
    `run()`, `async_sleep` (default `asyncio.sleep`) under `arun()`, `random` jitters the
    retry backoff (default `random.random`). A test replaces them to run without waiting.

    Raises:
        TypeError: one of them is not callable.
    """

    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Any] = time.sleep
    async_sleep: Callable[[float], Any] | None = None
    random: Callable[[], float] | None = None

    def __post_init__(self) -> None:
        for each in fields(self):
            value = getattr(self, each.name)
            if value is not None and not callable(value):
                raise WrongType(f"Clocks({each.name}=...) must be callable, got {value!r}")


@dataclass(frozen=True, slots=True)
class Hooks:
    """What user code is told of, or may change, as a run goes: `observers` are told of every
    run, transition and tool attempt (`forge.observe`); `callbacks` attaches ordinary
    transitions callbacks (`TransitionCallbacks`); `redact(tool, field, value)` sees every
    call's arguments and observation's payload before the trace keeps them; `codec` (a
    `JournalCodec`) writes the values JSON cannot hold when a journal is written to a file;
    `guards` (`forge.Guard`s, `forge.guardrails`) check the run's input, each call's
    arguments, each result and the answer in the guard states of the loop's definition.

    Raises:
        ValueError: a `redact` that is not callable, or a `codec` without encode and decode.
    """

    observers: tuple[Any, ...] = ()
    callbacks: Any = None
    redact: Callable[[str, str, Any], Any] | None = None
    codec: Any = None
    guards: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "observers", tuple(self.observers))
        if isinstance(self.guards, list):
            object.__setattr__(self, "guards", tuple(self.guards))  # checked with the loop (forge.spec)
        if self.redact is not None and not callable(self.redact):
            raise UsageError("redact must be callable as redact(tool, field, value) -> value")
        codec = self.codec
        if codec is not None and not (callable(getattr(codec, "encode", None))
                                      and callable(getattr(codec, "decode", None))):
            raise UsageError("codec must have encode(value) -> JSON data and decode(data) -> value")


GROUPS: Mapping[str, type] = {"limits": Limits, "retry": Retry, "clocks": Clocks, "hooks": Hooks}
"""Each grouped argument of AgentLoop and the value it takes."""

_NEVER_FLAT = frozenset({"max_parallel", "guards", "cost_budget", "prices", "time_budget"})
"""Came with the groups: never an AgentLoop keyword of its own."""
FLAT_NAMES: Mapping[str, str] = {each.name: group for group, kind in GROUPS.items() for each in fields(kind)
                                 if each.name not in _NEVER_FLAT}
"""The group each flat name of an earlier forge now belongs to."""


@dataclass(frozen=True, slots=True)
class Grouped:
    """The four values a loop was given, with defaults for those it was not."""

    limits: Limits = field(default_factory=Limits)
    retry: Retry = field(default_factory=Retry)
    clocks: Clocks = field(default_factory=Clocks)
    hooks: Hooks = field(default_factory=Hooks)


def grouped(given: Mapping[str, Any], flat: Mapping[str, Any], base: Grouped | None = None,
            stacklevel: int = 3) -> Grouped:
    """`base` (default: every value's defaults) with the values `given` by group name (None:
    keep base's) and the flat names of an earlier forge in `flat` changed in their groups,
    each flat name warned about.

    Raises:
        TypeError: a name that is neither a group nor a flat name, or a group given as
            something other than its value.
        ValueError: a flat name given together with its group (which one counts would be
            a guess), or a value its group refuses.
    """
    base = base if base is not None else _DEFAULTS
    values: dict[str, Any] = {}
    for name, kind in GROUPS.items():
        value = given.get(name)
        if value is not None and not isinstance(value, kind):
            raise WrongType(f"AgentLoop({name}=...) takes a forge.{kind.__name__}, got {type(value).__name__}")
        values[name] = value
    if not flat and not any(values.values()):  # what most loops are made with: base as it is, shared
        return base
    moved: dict[str, dict[str, Any]] = {}
    for name, value in flat.items():
        group = FLAT_NAMES.get(name)
        if group is None:
            raise WrongType(f"AgentLoop() got an unexpected keyword argument {name!r}")
        if values[group] is not None:
            raise UsageError(f"AgentLoop got both {group}= and {name}=: pass {name} inside "
                             f"{GROUPS[group].__name__}(...)")
        moved.setdefault(group, {})[name] = value
    for group, names in moved.items():
        shown = ", ".join(f"{name}=..." for name in names)
        warnings.warn(f"AgentLoop({shown}) is deprecated: pass {group}={GROUPS[group].__name__}({shown})",
                      DeprecationWarning, stacklevel=stacklevel)
        values[group] = replace(getattr(base, group), **names)
    return Grouped(**{name: getattr(base, name) if value is None else value for name, value in values.items()})


_DEFAULTS = Grouped()
"""The values of a loop given none (they are frozen: every such loop shares them)."""
