"""What every debugger view shares: one transition per step, back-stepping, breakpoints,
continue, and the diagram of the path so far. A live `DebugSession` and a `ReplaySession`
over a recorded trace differ only in how they move one transition forwards or back."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import graphviz

from forge.debug.breakpoints import Breakpoint, BreakpointSet
from forge.errors import ForgeError
from forge.records.definition import MachineDefinition
from forge.records.trace import TransitionRecord

__all__ = ["AtStart", "ContinueResult", "SessionFinished", "Stepper"]


class SessionFinished(ForgeError, RuntimeError):
    """The run is in a terminal state; there is no next transition (use back())."""


class AtStart(ForgeError, RuntimeError):
    """No transition has been taken; there is nothing to step back over."""


@dataclass(frozen=True, slots=True)
class ContinueResult:
    """The transitions `continue_()` fired, and the breakpoint that stopped it (None when
    the run reached a terminal state, or when Ctrl-C did: `interrupted`)."""

    fired: tuple[TransitionRecord, ...]
    hit: Breakpoint | None
    interrupted: bool = False


class Stepper:
    """Base of the debugger views. Subclasses provide `_forward`, `_backward`, `state`,
    `trace` and `definition`."""

    definition: MachineDefinition
    _records: Sequence[TransitionRecord]  # every record known, taken or ahead
    _position: int  # how many of them have been taken

    def __init__(self, definition: MachineDefinition) -> None:
        self.definition = definition
        self._breakpoints = BreakpointSet(
            frozenset(s.name for s in definition.states), frozenset(t.trigger for t in definition.transitions)
        )

    # subclass hooks
    @property
    def state(self) -> str:
        raise NotImplementedError

    @property
    def trace(self) -> tuple[TransitionRecord, ...]:
        """The transitions taken so far, as a value (later steps do not change it)."""
        return tuple(self._records[: self._position])

    @property
    def messages(self) -> tuple[dict[str, Any], ...]:
        """The policy's conversation so far (an LLM policy's chat history)."""
        raise NotImplementedError

    def _forward(self) -> TransitionRecord:
        raise NotImplementedError

    def _backward(self) -> None:
        raise NotImplementedError

    # shared behaviour
    @property
    def done(self) -> bool:
        """True once the run is in a terminal state."""
        return self.definition.state(self.state).terminal

    @property
    def step_number(self) -> int:
        """The loop iteration of the last transition taken (0 before the first)."""
        return self._records[self._position - 1].step if self._position else 0

    def step(self) -> TransitionRecord:
        """Fire exactly one transition and return its record.

        Raises:
            SessionFinished: the run is already in a terminal state.
        """
        if self.done:
            raise SessionFinished(f"the run has ended in {self.state!r}; back() to step through it again")
        return self._forward()

    def back(self) -> TransitionRecord:
        """Return to the state before the last transition; returns the record stepped back over.

        Raises:
            AtStart: no transition has been taken.
        """
        if not self._position:
            raise AtStart("at the start of the run; there is no transition to step back over")
        record = self._records[self._position - 1]
        self._backward()
        return record

    def continue_(self, on_step: Callable[[TransitionRecord], None] | None = None) -> ContinueResult:
        """Fire transitions until a breakpoint is hit or the run ends; at least one fires.

        `on_step(record)` is called after each (progress as it goes). Ctrl-C
        (KeyboardInterrupt) stops it at the transition it was in: that transition is undone
        in the session (a tool it had already called has still run) and the result says
        `interrupted`.

        Raises:
            SessionFinished: the run is already in a terminal state.
        """
        if self.done:
            self.step()  # raises SessionFinished, saying why
        fired: list[TransitionRecord] = []
        try:
            while True:
                fired.append(self._forward())
                if on_step is not None:
                    on_step(fired[-1])
                hit = self._breakpoints.first_hit(fired[-1], self)
                if hit is not None or self.done:
                    return ContinueResult(tuple(fired), hit)
        except KeyboardInterrupt:
            return ContinueResult(tuple(fired), None, interrupted=True)

    def break_at(self, state: str | None = None, *, trigger: str | None = None,
                 when: Callable[[TransitionRecord, Any], bool] | None = None) -> Breakpoint:
        """Break on entering `state`, on firing `trigger`, or when `when(record, session)`.

        Raises:
            ValueError: not exactly one given, or an unknown state or trigger.
        """
        return self._breakpoints.add(state, trigger=trigger, when=when)

    def remove_breakpoint(self, point: Breakpoint | int) -> Breakpoint:
        """Raises ValueError for an unknown breakpoint."""
        return self._breakpoints.remove(point)

    def clear_breakpoints(self) -> None:
        self._breakpoints.clear()

    @property
    def breakpoints(self) -> tuple[Breakpoint, ...]:
        return tuple(self._breakpoints)

    def diagram(self) -> graphviz.Digraph:
        """The machine with the path so far overlaid and the current state marked."""
        from forge.diagram import diagram

        return diagram(self.definition, trace=self.trace)
