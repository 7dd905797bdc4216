"""Breakpoints: on entering a state, on firing a trigger, or when a predicate says so."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from forge.errors import UsageError
from forge.records.trace import TransitionRecord

__all__ = ["Breakpoint", "BreakpointSet"]


@dataclass(frozen=True, slots=True)
class Breakpoint:
    """`kind` is "state", "trigger" or "predicate"; `id` numbers it within its session."""

    id: int
    kind: str
    target: str
    predicate: Callable[[TransitionRecord, Any], bool] | None = None

    def hit(self, record: TransitionRecord, session: Any) -> bool:
        if self.kind == "state":
            return record.dest == self.target
        if self.kind == "trigger":
            return record.trigger == self.target
        assert self.predicate is not None
        return bool(self.predicate(record, session))

    def __str__(self) -> str:
        return f"#{self.id} {self.kind} {self.target}"


class BreakpointSet:
    """A session's breakpoints; they persist until removed."""

    def __init__(self, states: frozenset[str], triggers: frozenset[str]) -> None:
        self._states, self._triggers = states, triggers
        self._items: dict[int, Breakpoint] = {}
        self._next = 1

    def add(self, state: str | None = None, *, trigger: str | None = None,
            when: Callable[[TransitionRecord, Any], bool] | None = None) -> Breakpoint:
        """Add exactly one of: a state, a trigger, or a predicate `when(record, session)`.

        Raises:
            ValueError: none or several given, or an unknown state or trigger (listed).
        """
        given = [x for x in (state, trigger, when) if x is not None]
        if len(given) != 1:
            raise UsageError("break on exactly one of: a state, trigger=…, or when=…")
        if state is not None:
            if state not in self._states:
                raise UsageError(f"unknown state {state!r}; states are {', '.join(sorted(self._states))}")
            point = Breakpoint(self._next, "state", state)
        elif trigger is not None:
            if trigger not in self._triggers:
                raise UsageError(f"unknown trigger {trigger!r}; triggers are {', '.join(sorted(self._triggers))}")
            point = Breakpoint(self._next, "trigger", trigger)
        else:
            assert when is not None
            if not callable(when):
                raise UsageError("when must be callable as when(record, session) -> bool")
            point = Breakpoint(self._next, "predicate", getattr(when, "__name__", "predicate"), when)
        self._items[point.id] = point
        self._next += 1
        return point

    def remove(self, point: Breakpoint | int) -> Breakpoint:
        """Raises ValueError when there is no such breakpoint."""
        key = point.id if isinstance(point, Breakpoint) else point
        if key not in self._items:
            raise UsageError(f"no breakpoint #{key}; breakpoints are {', '.join(map(str, self)) or '(none)'}")
        return self._items.pop(key)

    def clear(self) -> None:
        self._items.clear()

    def first_hit(self, record: TransitionRecord, session: Any) -> Breakpoint | None:
        return next((point for point in self._items.values() if point.hit(record, session)), None)

    def __iter__(self) -> Iterator[Breakpoint]:
        return iter(tuple(self._items.values()))

    def __len__(self) -> int:
        return len(self._items)
