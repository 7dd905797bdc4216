"""The engine: the one module that touches `transitions`.

One `transitions.Machine` is built per definition and shared by every run of it. Runs are
never added to the machine as models (`add_model` scans a list, and the machine would keep
every run alive); instead the engine fires the machine's `Event` objects on the run
directly, so starting a run costs the same with one or ten thousand runs alive, and a
finished run is referenced by nothing in the machine.

Firing a state: run its stage action, evaluate every guard of its outgoing transitions,
require exactly one transition enabled, and let `transitions` take it (its conditions read
the guard values just recorded). Zero or several enabled transitions raise instead of
letting the file's order decide. Guards are pure functions of the verdict, so each
(state, verdict) pair is evaluated once, when the engine is built, and reused.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from transitions import Machine

from forge.machine.definition import MachineDefinition, TransitionDef
from forge.machine.run import Run
from forge.machine.stages import ACTIONS, GUARDS
from forge.machine.trace import GuardResult, TransitionRecord

__all__ = ["LoopEngine", "NoTransitionEnabled", "RunFinished", "engine_for"]


class RunFinished(RuntimeError):
    """The run is in a terminal state; there is nothing left to fire."""


class NoTransitionEnabled(RuntimeError):
    """Zero or several transitions were enabled, so the machine cannot choose one.

    `state`, `verdict` and `guards` say what was evaluated; `enabled` lists the entries of
    the enabled transitions (empty when none was). `forge check` finds these statically.
    """

    def __init__(self, state: str, verdict: str | None, guards: tuple[GuardResult, ...],
                 enabled: tuple[str, ...]) -> None:
        shown = ", ".join(f"{g.name}={g.value}" for g in guards) or "no guards"
        what = f"{len(enabled)} transitions enabled ({'; '.join(enabled)})" if enabled else "no transition enabled"
        super().__init__(f"state {state!r} with verdict {verdict!r}: {what}; guards: {shown}")
        self.state, self.verdict, self.guards, self.enabled = state, verdict, guards, enabled


@dataclass(frozen=True, slots=True)
class _Choice:
    """What one verdict decides in one state: every guard's value and the one transition."""

    guards: tuple[GuardResult, ...]
    values: Mapping[str, bool]
    transition: TransitionDef


@dataclass(frozen=True, slots=True)
class _CompiledState:
    terminal: bool
    action: Callable[[Run], str] | None
    transitions: tuple[TransitionDef, ...]
    guards: tuple[tuple[str, str], ...]  # (guard name, verdict it tests), each name once
    choices: Mapping[str | None, _Choice]  # guards are pure in the verdict: decided once per verdict

    def choose(self, state: str, verdict: str | None) -> _Choice:
        """The choice `verdict` makes here. Raises NoTransitionEnabled unless exactly one
        transition is enabled."""
        known = self.choices.get(verdict)
        if known is not None:
            return known
        values = {name: verdict == wanted for name, wanted in self.guards}
        guards = tuple(GuardResult(name, value) for name, value in values.items())
        enabled = [t for t in self.transitions if t.guard is None or values[t.guard]]
        if len(enabled) != 1:
            raise NoTransitionEnabled(state, verdict, guards, tuple(t.entry for t in enabled))
        return _Choice(guards, values, enabled[0])


def _condition(guard: str) -> Callable[[Any], bool]:
    def holds(event: Any) -> bool:
        values: dict[str, bool] = event.model.guard_values
        return values[guard]

    holds.__name__ = guard
    return holds


class LoopEngine:
    """Runs any number of `Run`s through one definition's machine."""

    def __init__(self, definition: MachineDefinition, clock: Callable[[], float] = time.perf_counter) -> None:
        self.definition = definition
        self._clock = clock
        self._machine = Machine(
            model=None,
            states=[{"name": s.name, "final": s.terminal} for s in definition.states],
            initial=definition.initial,
            auto_transitions=False,
            send_event=True,
            name=definition.name,
        )
        for t in definition.transitions:
            conditions: list[Any] = [_condition(t.guard)] if t.guard else []
            self._machine.add_transition(t.trigger, t.source, t.dest, conditions=conditions)
        self._events = dict(self._machine.events)
        self._states: dict[str, _CompiledState] = {}
        for state in definition.states:
            outgoing = definition.outgoing(state.name)
            names = dict.fromkeys(t.guard for t in outgoing if t.guard)
            compiled = _CompiledState(
                terminal=state.terminal,
                action=ACTIONS[state.action].run if state.action else None,
                transitions=outgoing,
                guards=tuple((name, GUARDS[name].verdict) for name in names),
                choices={},
            )
            verdicts: frozenset[str | None] = ACTIONS[state.action].verdicts if state.action else frozenset({None})
            choices = {}
            for verdict in verdicts:
                try:
                    choices[verdict] = compiled.choose(state.name, verdict)
                except NoTransitionEnabled:
                    pass  # raised again, with its values, if a run ever returns this verdict
            self._states[state.name] = replace(compiled, choices=choices)

    def is_terminal(self, run: Run) -> bool:
        return self._states[run.state].terminal

    def fire(self, run: Run) -> TransitionRecord:
        """Fire the one transition enabled in `run`'s current state and record it.

        Raises:
            RunFinished: `run` is already in a terminal state.
            NoTransitionEnabled: the verdict enables zero or several transitions.
        """
        started = self._clock()
        compiled = self._states[run.state]
        if compiled.terminal:
            raise RunFinished(f"the run has ended in {run.state!r}; there is nothing left to fire")
        if compiled.action is not None:
            verdict: str | None = compiled.action(run)  # every action sets run.detail
        else:
            verdict, run.detail = None, {}
        run.verdict = verdict
        choice = compiled.choose(run.state, verdict)
        run.guard_values = choice.values
        chosen = choice.transition
        source = run.state
        self._events[chosen.trigger].trigger(run)
        record = TransitionRecord(
            sequence=len(run.trace) + 1,
            step=run.step,
            source=source,
            trigger=chosen.trigger,
            dest=run.state,
            guards=choice.guards,
            verdict=verdict,
            duration_s=self._clock() - started,
            detail=run.detail,
            machine=self.definition.name,
        )
        run.trace.append(record)
        return record


@lru_cache(maxsize=64)
def engine_for(definition: MachineDefinition) -> LoopEngine:
    """The shared engine of `definition`: built once, reused by every loop that runs it."""
    return LoopEngine(definition)
