"""The engine: the one module that touches `transitions`, and where it decides the route.

Every transition of a definition hangs on one transitions event, `advance`, so each state's
outgoing transitions are that event's transitions from the state. Firing a run is
`machine.events["advance"].trigger(run)`, through transitions' own API:

- the machine's `prepare_event` callback runs the state's stage action (its verdict lands
  on the run);
- each transition's *condition* calls the guard of `forge.machine.catalog` on that verdict;
- transitions evaluates the conditions and executes the transition they enable (exit and
  enter callbacks, the state change, `before`/`after` callbacks users attached);
- `after_state_change` appends the `TransitionRecord`; `on_exception` turns any failure in
  any of these hooks into a consistent `fatal_error` with a record naming the hook.

forge adds one rule to transitions' first-match search: every condition of the state that
can hold is evaluated and exactly one transition must be enabled, otherwise
`NoTransitionEnabled` (`forge check` proves this statically, so file order never decides). A
guard that only compares the verdict cannot hold after another verdict, so it is not evaluated
there; its value (False) follows from the verdict and is recorded all the same. The machine is shared by
every run of a definition; runs are never added as models (the machine would keep them
alive), so starting one costs the same with one or ten thousand alive, and runs in many
threads never touch each other. `AsyncLoopEngine` is the same machine on transitions'
`AsyncMachine`, driving the same stage actions (`forge.records.effects`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache, partial
from types import MappingProxyType
from typing import Any, Protocol, cast

from transitions import Machine, MachineError, Transition
from transitions.core import Condition, Event, EventData

from forge.errors import ForgeError, UsageError, WrongType
from forge.machine.asking import ANSWER_TRIGGER, UNASKED, asked, continuation
from forge.machine.catalog import GuardSpec, StageCatalog
from forge.machine.performers import run_async, run_sync
from forge.machine.run import Run
from forge.machine.stages import BUILTIN_STAGES
from forge.records.definition import FAILURE_STATE, FAILURE_TRIGGER, MachineDefinition, TransitionDef
from forge.records.effects import AsyncNotSupported, ObserverFailed, Steps
from forge.records.outcome import FactChanges, StageOutcome
from forge.records.trace import GuardResult, TransitionRecord, error_text

__all__ = [
    "ADVANCE",
    "AsyncLoopEngine",
    "DeadlinePassed",
    "LoopEngine",
    "NoTransitionEnabled",
    "RunFinished",
    "TransitionCallbacks",
    "async_engine_for",
    "engine_for",
]

ADVANCE = "advance"
"""The transitions event every transition hangs on; a definition's triggers label the edges."""

_wall_clock = time.time

_log = logging.getLogger("forge")


class DeadlinePassed(ForgeError, TimeoutError):
    """A waiting state's deadline passed with no answer: its timeout edge was taken."""

    def __init__(self, state: str, seconds: float) -> None:
        super().__init__(f"no answer in {state} within {seconds:g} s")
        self.state, self.seconds = state, seconds


class RunFinished(ForgeError, RuntimeError):
    """The run is in a terminal state; there is nothing left to fire."""


class NoTransitionEnabled(ForgeError, RuntimeError):
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


_Callbacks = Mapping[str, tuple[Callable[[EventData], Any], ...]]


@dataclass(frozen=True, eq=False)
class TransitionCallbacks:
    """Ordinary transitions callbacks, attached to a loop's machine without forking forge.

    `on_enter` / `on_exit` map a state name, `before` / `after` a trigger name of the
    definition, to callbacks; each receives transitions' `EventData` (`event.model` is the
    `Run`). They run inside the transition: one that raises ends the run in `fatal_error`,
    named in the trace. Under `arun` a callback may be `async def`.
    """

    on_enter: _Callbacks = field(default_factory=dict)
    on_exit: _Callbacks = field(default_factory=dict)
    before: _Callbacks = field(default_factory=dict)
    after: _Callbacks = field(default_factory=dict)

    @classmethod
    def of(cls, **callbacks: Mapping[str, Callable[[EventData], Any] | Iterable[Callable[[EventData], Any]]]
           ) -> TransitionCallbacks:
        """Accept one callable or several per name: `TransitionCallbacks.of(on_enter={"execute": fn})`."""
        return cls(**{kind: {name: tuple([fns] if callable(fns) else fns) for name, fns in by_name.items()}
                      for kind, by_name in callbacks.items()})

    def _key(self) -> tuple[Any, ...]:
        return tuple(tuple(sorted(kind.items())) for kind in (self.on_enter, self.on_exit, self.before, self.after))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TransitionCallbacks) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def check(self, definition: MachineDefinition) -> None:
        """Raises ValueError naming a state or trigger `definition` does not have."""
        states = {s.name for s in definition.states}
        triggers = {t.trigger for t in definition.transitions}
        for kind, by_name, known, what in (("on_enter", self.on_enter, states, "state"),
                                           ("on_exit", self.on_exit, states, "state"),
                                           ("before", self.before, triggers, "trigger"),
                                           ("after", self.after, triggers, "trigger")):
            for name, functions in by_name.items():
                if name not in known:
                    raise UsageError(f"{kind} callbacks name {name!r}, which is not a {what} of "
                                     f"{definition.name!r} ({', '.join(sorted(known))})")
                for function in functions:
                    if not callable(function):
                        raise UsageError(f"{kind}[{name!r}] holds {function!r}, which is not callable")


NO_CALLBACKS = TransitionCallbacks()


def _choose(event_data: Any, candidates: Iterable[Any]) -> Any:
    """forge's one rule on top of transitions' search, for the sync and async events alike:
    evaluate every condition of every candidate (guards are plain functions) and require
    exactly one enabled; mark it as the event's transition, decided.

    Raises:
        NoTransitionEnabled: zero or several are enabled.
    """
    enabled = []
    for transition in candidates:  # loops rather than all(...): no generator per candidate on the hot path
        for condition in transition.conditions:
            if not condition.check(event_data):
                break
        else:
            enabled.append(transition)
    if len(enabled) != 1:
        run = cast(Run, event_data.model)
        guards = tuple(GuardResult(name, value) for name, value in run.firing.guard_values.items())
        raise NoTransitionEnabled(run.state, run.firing.verdict, guards, tuple(t.definition.entry for t in enabled))
    event_data.transition = event_data.decided = enabled[0]
    return enabled[0]


_Candidates = tuple[list[Any], dict[str, bool]]
"""The transitions that may be enabled after one verdict, and every guard's value for it."""
_VerdictIndex = Mapping[str, tuple[dict[str, _Candidates], _Candidates]]
_UNINDEXED: _VerdictIndex = MappingProxyType({})


def _verdict_index(event: Event, stages: StageCatalog) -> _VerdictIndex:
    """For each state whose guards only compare the verdict (no `GuardSpec.test`), the
    candidates each verdict leaves: the unguarded transitions and those whose guard names that
    verdict. A guard of another verdict cannot hold, so it is not evaluated; its value (False)
    is known from the verdict alone and goes into the record as before. States with a custom
    test, or with no guard at all, are left out: all their conditions are evaluated."""
    index = {}
    for state, listed in event.transitions.items():
        transitions = cast(list[_Transition], listed)  # or the async machine's, alike
        guards = [t.definition.guard for t in transitions]
        specs = [stages.guards[g] for g in guards if g]
        if not specs or any(spec.test is not None for spec in specs):
            continue
        by_verdict: dict[str, _Candidates] = {}
        for verdict in {spec.verdict for spec in specs}:
            enabled = [t for t in transitions if not t.definition.guard or stages.guards[t.definition.guard].verdict == verdict]
            by_verdict[verdict] = (enabled, {g: stages.guards[g].verdict == verdict for g in guards if g})
        index[state] = (by_verdict, ([t for t in transitions if not t.definition.guard], {g: False for g in guards if g}))
    return index


def _candidates(event: Any, event_data: Any) -> list[Any]:
    """The transitions of the event's source state that the verdict leaves (`_verdict_index`),
    the guards it rules out noted as False."""
    state = event_data.state.name
    index = event.by_verdict.get(state)
    if index is None:
        return cast(list[Any], event.transitions[state])
    firing = event_data.model.firing
    candidates: list[Any]
    candidates, values = index[0].get(firing.verdict, index[1])
    firing.guard_values = values.copy()
    return candidates


class _Firing(Protocol):
    """What forge's callbacks read of transitions' `EventData` while a run fires."""

    model: Run
    transition: Any
    error: BaseException | None


class _Condition(Condition):
    """transitions' condition wrapper, called directly: forge registers callables (never
    names to resolve on a model) and always sends the event."""

    def check(self, event_data: EventData) -> bool:
        return bool(self.func(event_data) == self.target)  # type: ignore[operator]  # func is our callable


class _Transition(Transition):
    """A transitions `Transition` that knows the definition's edge it stands for.

    `plain` is set once the engine's machine is built, for an edge that has no callbacks of
    its own and whose states have none: executing it is then transitions' `execute` less
    its dispatch over empty callback lists and its debug logging (the state is set on the
    run as `set_state` sets it; the machine's `after_state_change` callbacks run as ever)."""

    condition_cls = _Condition
    plain = False
    _dest_state: Any = None

    def __init__(self, *args: Any, definition: TransitionDef, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.definition = definition

    def execute(self, event_data: EventData) -> bool:
        if not self.plain:
            return bool(super().execute(event_data))
        machine = event_data.machine
        setattr(event_data.model, machine.model_attribute, self.dest)
        event_data.state = self._dest_state
        for callback in machine.after_state_change:
            callback(event_data)  # type: ignore[operator]  # forge registers callables, never names
        return True

    def _eval_conditions(self, event_data: EventData) -> bool:
        # _Event evaluated every condition once already and chose this transition
        return getattr(event_data, "decided", None) is self or bool(super()._eval_conditions(event_data))


class _Event(Event):
    """transitions' event, made exclusive: all conditions evaluated, exactly one enabled.

    A machine without a queue runs a trigger at once (`Machine._process` calls it); `trigger`
    does that directly, without the partial it would wrap it in."""

    def trigger(self, model: Any, *args: Any, **kwargs: Any) -> bool:
        event_data = EventData(None, self, self.machine, model, args=args, kwargs=kwargs)
        if self.machine.has_queue:
            return bool(self.machine._process(partial(self._trigger, event_data)))
        return bool(self._trigger(event_data))

    by_verdict = _UNINDEXED

    def _process(self, event_data: EventData) -> bool:
        self.machine.callbacks(self.machine.prepare_event, event_data)
        chosen = _choose(event_data, _candidates(self, event_data))
        event_data.result = chosen.execute(event_data)
        return event_data.result


class _Machine(Machine):
    """transitions' Machine with forge's transition and event classes. Callbacks are
    dispatched as the library does, less its INFO log call per callback (forge logs each
    transition once, through its own observer)."""

    transition_cls = _Transition
    event_cls = _Event

    def callbacks(self, funcs: Iterable[Any], event_data: EventData) -> None:
        for func in funcs:
            self.callback(func, event_data)


@lru_cache(maxsize=1)
def _async_machine_class() -> type[Machine]:
    """transitions' AsyncMachine with forge's transition and event classes, built on first
    use so that importing forge does not import asyncio.

    transitions' stubs type the async overrides as their sync parents' (bool, not a
    coroutine), so these are checked by the tests rather than by mypy. Callback lists are
    awaited in order: the library gathers each into Tasks, so callbacks of one hook would
    run concurrently; in order, a run's callbacks see each other's effects as in the sync
    machine, a failure is attributed to the callback that raised, and no Task is made per
    callback.
    """
    from transitions.extensions.asyncio import AsyncMachine

    class _AsyncMachine(AsyncMachine):
        transition_cls = _async_transition_class()
        event_cls = _async_event_class()

        async def callbacks(self, funcs: Iterable[Any], event_data: Any) -> None:  # type: ignore[override]
            for func in funcs:
                result = self.resolve_callable(func, event_data)(event_data)
                if result is not None and isinstance(result, Awaitable):  # a callback's None: no ABC check
                    await result

        # transitions tracks the task of every trigger per model, so that a new event can
        # cancel a transition still running on the same model. A forge run fires one
        # transition at a time (afire awaits each), so there is never one to cancel; the
        # bookkeeping is skipped, and a cancelled arun task raises CancelledError directly.
        async def process_context(self, func: Any, model: Any) -> Any:
            return await self._process_async(func, model)

        async def cancel_running_transitions(self, model: Any, msg: Any = None) -> None:
            return None

    return _AsyncMachine


def _async_transition_class() -> type[Any]:
    """transitions' AsyncTransition as forge's `_Transition` is the sync one (plain
    transitions fire without callbacks; a chosen transition's guards are not asked again)."""
    from transitions.extensions.asyncio import AsyncTransition

    class _AsyncTransition(AsyncTransition):
        condition_cls = _Condition  # type: ignore[assignment]  # forge's guards are plain functions: no coroutine each
        plain = False  # as `_Transition.plain`
        _dest_state: Any = None

        def __init__(self, *args: Any, definition: TransitionDef, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.definition = definition

        async def execute(self, event_data: Any) -> bool:  # type: ignore[override]
            if not self.plain:
                return bool(await super().execute(event_data))
            machine = event_data.machine
            setattr(event_data.model, machine.model_attribute, self.dest)
            event_data.state = self._dest_state
            for callback in machine.after_state_change:
                result = callback(event_data)
                if result is not None and isinstance(result, Awaitable):  # a callback's None: no ABC check
                    await result
            return True

        async def _eval_conditions(self, event_data: Any) -> bool:  # type: ignore[override]
            if getattr(event_data, "decided", None) is self:
                return True
            return all(c.check(event_data) for c in self.conditions)

    return _AsyncTransition


def _async_event_class() -> type[Any]:
    """transitions' AsyncEvent as forge's `_Event` is the sync one."""
    from transitions.extensions.asyncio import AsyncEvent

    class _AsyncEvent(AsyncEvent):
        """As `_Event`: a machine without a queue runs a trigger at once, without the partial
        and the two coroutines (`process_context`, `_process_async`) it would go through."""

        by_verdict = _UNINDEXED

        async def trigger(self, model: Any, *args: Any, **kwargs: Any) -> bool:  # type: ignore[override]
            event_data: Any = EventData(None, self, self.machine, model, args=args, kwargs=kwargs)
            machine: Any = self.machine
            if machine.has_queue:
                return bool(await machine.process_context(partial(self._trigger, event_data), model))
            return bool(await self._trigger(event_data))

        async def _process(self, event_data: Any) -> bool:  # type: ignore[override]
            machine: Any = self.machine
            await machine.callbacks(machine.prepare_event, event_data)
            chosen = _choose(event_data, _candidates(self, event_data))
            event_data.result = await chosen.execute(event_data)
            return bool(event_data.result)

    return _AsyncEvent


def _mark_plain(machine: Machine, event: Event) -> None:
    """Mark the transitions that no callback of anyone's watches (see `_Transition.plain`)."""
    if machine.before_state_change or machine.on_final or machine.finalize_event:
        return
    for transitions in event.transitions.values():
        for transition in cast(list[_Transition], transitions):  # or the async machine's, alike
            source, dest = machine.get_state(transition.source), machine.get_state(str(transition.dest))
            transition._dest_state = dest
            transition.plain = not (transition.prepare or transition.before or transition.after or source.on_exit
                                    or dest.on_enter)


def _condition(spec: GuardSpec) -> Callable[[_Firing], bool]:
    """The transitions condition of a guard: `spec.holds(verdict)`, noted on the run."""
    name, wanted, hook = spec.name, spec.verdict, f"guard {spec.name}"
    if spec.test is None:  # a plain verdict comparison, which cannot raise: no hook to name

        def guard(event: _Firing) -> bool:
            firing = event.model.firing
            value = firing.guard_values[name] = firing.verdict == wanted
            return value
    else:
        holds = spec.holds

        def guard(event: _Firing) -> bool:
            run = event.model
            firing = run.firing
            firing.hook = hook
            value = firing.guard_values[name] = holds(firing.verdict)
            return value

    guard.__name__ = name
    return guard


def _labelled(kind: str, where: str, function: Callable[[EventData], Any], asynchronous: bool
              ) -> Callable[[_Firing], Any]:
    label = f"{kind} {where}: {getattr(function, '__qualname__', repr(function))}"

    def callback(event: _Firing) -> Any:
        event.model.hook = label
        result = function(cast(EventData, event))
        if isinstance(result, Awaitable) and not asynchronous:
            if isinstance(result, Coroutine):
                result.close()
            raise AsyncNotSupported(label)
        return result

    return callback


class LoopEngine:
    """Runs any number of `Run`s through one definition's transitions machine.

    `stages` resolves the definition's action and guard names; `callbacks` are user
    callbacks attached to this engine's machine (not to any other loop's).
    """

    asynchronous = False

    def __init__(self, definition: MachineDefinition, stages: StageCatalog = BUILTIN_STAGES,
                 callbacks: TransitionCallbacks = NO_CALLBACKS, clock: Callable[[], float] = time.perf_counter) -> None:
        callbacks.check(definition)
        self.definition, self.stages = definition, stages
        self._name = definition.name
        self._clock = clock
        self._terminal = {s.name: s.terminal for s in definition.states}
        self._waiting = frozenset(s.name for s in definition.states if s.outcome == "needs_input")
        self._actions: dict[str, tuple[str, Callable[[Run], Steps[StageOutcome]]]] = {
            s.name: (f"action {s.action}", stages.actions[s.action].run) for s in definition.states if s.action
        }
        self._guard_tuples: dict[tuple[str, str | None], tuple[dict[str, bool], tuple[GuardResult, ...]]] = {}
        machine_cls = _async_machine_class() if self.asynchronous else _Machine
        self._machine: Machine = machine_cls(
            model=None,
            states=[{"name": s.name, "final": s.terminal} for s in definition.states],
            initial=definition.initial,
            auto_transitions=False,
            send_event=True,
            name=definition.name,
            prepare_event=[cast(Any, self._aprepare if self.asynchronous else self._prepare)],
            after_state_change=[self._record],
            on_exception=[self._fail],
        )

        def users(kind: str, by_name: _Callbacks, name: str) -> list[Any]:
            return [_labelled(kind, name, f, self.asynchronous) for f in by_name.get(name, ())]

        for t in definition.transitions:
            conditions: list[Any] = [_condition(stages.guards[t.guard])] if t.guard else []
            self._machine.add_transition(ADVANCE, t.source, t.dest, conditions=conditions, definition=t,
                                        before=users("before", callbacks.before, t.trigger),
                                        after=users("after", callbacks.after, t.trigger))
        for state in definition.states:
            for function in users("on_enter", callbacks.on_enter, state.name):
                self._machine.get_state(state.name).add_callback("enter", function)
            for function in users("on_exit", callbacks.on_exit, state.name):
                self._machine.get_state(state.name).add_callback("exit", function)
        self.event: Event = self._machine.events[ADVANCE]
        _mark_plain(self._machine, self.event)
        self.event.by_verdict = _verdict_index(self.event, stages)  # type: ignore[attr-defined]

    @property
    def machine(self) -> Machine:
        """The transitions machine itself: `engine.machine.events[ADVANCE].trigger(run)` fires a run
        exactly as `fire` does (shared by every run; never add runs to it as models)."""
        return self._machine

    def is_terminal(self, run: Run) -> bool:
        return self._terminal[run.state]

    def awaits_answer(self, run: Run) -> bool:
        """Whether `run` waits in a needs-input state where its performer has someone to
        answer it (`Performer.asks`): then `answer` goes on from there."""
        performer = run.performer
        return run.state in self._waiting and performer is not None and performer.asks()

    def answer(self, run: Run) -> bool:
        """Ask `run`'s performer for an answer to what the run waits for and go on by it
        (`answered`); False, doing nothing, when the run does not wait for one or nobody
        answers it there. Raises as `answered`."""
        if run.state not in self._waiting:
            return False
        assert run.performer is not None, "AgentLoop.start gives every run its performer"
        return self.answered(run, run_sync(asked(run), run.performer))

    def answered(self, run: Run, asked: Any) -> bool:
        """Go on from the waiting state `run` is in as `asked` (what `forge.machine.asking.asked`
        returned) says: by the `answer` edge to the initial state, the answer applied; by the
        state's `timeout` edge when the wait's deadline passed; or not at all, when nobody
        answered (False: the run ends where it is).

        Raises:
            UsageError: a deadline passed in a state that has no timeout edge, or an answer
                adds a tool the run's performer cannot give it.
        """
        if asked is UNASKED:
            return False
        waiting, answer = asked
        if answer is None:
            self.time_out(run)
            return True
        going_on = continuation(run, answer, waiting)
        if going_on.added_tool is not None:
            performer = run.performer
            assert performer is not None, "AgentLoop.start gives every run its performer"
            run.config = performer.with_tool(run.config, going_on.added_tool)
        if going_on.goal is not None:
            run.goal = going_on.goal
            run.loop_state.turn_start = run.loop_state.step_count
        facts: FactChanges = {**going_on.facts}
        if going_on.goal is not None:
            facts["goal"] = None  # a new goal: its input guards check it afresh
        if going_on.approvals:
            facts["approvals"] = {**run.facts.approvals, **going_on.approvals}
        run.fold(facts, {})
        source = self._outside(run)
        self._machine.set_state(self.definition.initial, model=run)
        wanted = "transition_finished" in run.observers.wanted
        record = self._append(run, (source, ANSWER_TRIGGER, self.definition.initial), (), going_on.detail,
                              record=wanted)
        if record is not None:
            run.observers.notify(run, "transition_finished", record)
        return True

    def _outside(self, run: Run) -> str:
        """Begin a firing that no action makes (a deadline, an answer): from the state the
        run is in, with no verdict, guards or detail yet. Returns that state."""
        firing = run.firing
        firing.source, firing.started, firing.recorded, firing.guard_values = run.state, self._clock(), False, {}
        firing.verdict, firing.detail, firing.subject, firing.record = None, {}, None, None
        return run.state

    def fire(self, run: Run) -> TransitionRecord:
        """Fire the one transition enabled in `run`'s current state and return its record.

        Any exception inside the transition (stage action, guard, callback, observer) ends
        the run in `fatal_error` instead: the returned record is that failure's.

        Raises:
            RunFinished: `run` is already in a terminal state.
            NoTransitionEnabled: the verdict enables zero or several transitions.
        """
        self.advance(run)
        return run.firing.record if run.firing.record is not None else run.trace[-1]

    def advance(self, run: Run) -> None:
        """`fire`, without making the record when nobody asked for one (what `run()` uses)."""
        self._refuse_finished(run)
        self.event.trigger(run)

    def fail_outside(self, run: Run, error: Exception) -> TransitionRecord:
        """End `run`, which no transition is firing in, in `fatal_error` by the `fail` edge
        from the state it is in, naming `run.hook` (what raised) in the record: an observer's
        `run_started` that raised. Returns the failure's record.

        Raises:
            RunFinished: `run` is already in a terminal state.
        """
        self._refuse_finished(run)
        run.firing.started, run.firing.verdict, run.firing.subject = self._clock(), None, None
        return self._to_failure(run, error)

    def time_out(self, run: Run) -> TransitionRecord:
        """Take the `timeout` edge of the waiting state `run` is in: its deadline passed with
        no answer (a durable run's wait, `RunStart(..., timed_out=STATE)`). When the
        edge leads on (to a state that runs), the policy is told: an observation of the
        waiting state, `retryable_error`, whose payload is a `DeadlinePassed`. Returns the
        transition's record.

        Raises:
            UsageError: the state has no timeout edge.
        """
        edge = self.definition.timeout_edge(run.state)
        if edge is None:
            raise UsageError(f"state {run.state!r} has no timeout edge to take")
        seconds = self.definition.state(edge.source).timeout or 0.0
        firing = run.firing
        self._outside(run)
        self._machine.set_state(edge.dest, model=run)
        passed = DeadlinePassed(edge.source, seconds)
        if not self._terminal[edge.dest]:
            firing.subject = run.loop_state.record(edge.source, "retryable_error", passed)
        wanted = "transition_finished" in run.observers.wanted
        record = self._append(run, (edge.source, edge.trigger, edge.dest), (), {"timed_out": str(passed)})
        assert record is not None
        if wanted:
            run.observers.notify(run, "transition_finished", record)
        return record

    def _to_failure(self, run: Run, error: Exception) -> TransitionRecord:
        """Move `run` from the state it is in to `fatal_error` by the `fail` edge, keeping
        `error`, and record that, naming `run.hook`: how any failure ends a run."""
        failed_in = run.state
        self._machine.set_state(FAILURE_STATE, model=run)
        run.facts.error = error
        record = self._append(run, (failed_in, FAILURE_TRIGGER, FAILURE_STATE), (), _failure_detail(run.hook, error))
        assert record is not None  # fire() returns it, and transition_failed observers read it
        return record

    def _refuse_finished(self, run: Run) -> None:
        if self._terminal[run.state]:
            raise RunFinished(f"the run has ended in {run.state!r}; there is nothing left to fire")

    def _begin(self, event: _Firing) -> tuple[str, Callable[[Run], Steps[StageOutcome]]] | None:
        """Start a firing: note where from and when; tell observers. The state's action,
        if any, is returned for the caller to drive; an action-less state's verdict is None."""
        run = event.model
        firing = run.firing
        firing.source, firing.started, firing.recorded, firing.guard_values = run.state, self._clock(), False, {}
        firing.record = firing.subject = None
        if "transition_started" in run.observers.wanted:
            run.observers.notify(run, "transition_started", run.state)
        action = self._actions.get(run.state)
        if action is None:
            firing.verdict, firing.detail = None, {}
        else:
            firing.hook = action[0]
        return action

    def _prepare(self, event: _Firing) -> None:
        action = self._begin(event)
        if action is not None:
            run = event.model
            assert run.performer is not None, "AgentLoop.start gives every run its performer"
            _fold(run, run_sync(action[1](run), run.performer))

    async def _aprepare(self, event: _Firing) -> None:
        action = self._begin(event)
        if action is not None:
            run = event.model
            assert run.performer is not None, "AgentLoop.start gives every run its performer"
            _fold(run, await run_async(action[1](run), run.performer))

    def _guards_of(self, run: Run) -> tuple[GuardResult, ...]:
        """The guards evaluated this firing, as a tuple shared by every record with the same
        values (guards are functions of the verdict, so a state has a few such tuples)."""
        firing = run.firing
        key = (firing.source, firing.verdict)
        shared = self._guard_tuples.get(key)
        if shared is not None and shared[0] == firing.guard_values:
            return shared[1]
        values = firing.guard_values
        guards = tuple(GuardResult(n, v) for n, v in values.items())
        self._guard_tuples[key] = (values, guards)
        return guards

    def _append(self, run: Run, edge: tuple[str, str, str], guards: tuple[GuardResult, ...],
                detail: Mapping[str, Any], record: bool = True) -> TransitionRecord | None:
        """Add the transition along `edge` (source, trigger, dest) to the run's trace; make
        its record too when `record` (an observer reads it), else the trace makes one when asked."""
        firing = run.firing
        trace = run.trace
        performer = run.performer
        if performer is not None and performer.marked is not None:  # a fork's patched outcome: the record says so
            detail, performer.marked = {**detail, "patched": performer.marked}, None
        trace.add(run.facts.step, edge, guards, firing.verdict, self._clock() - firing.started, detail,
                  _wall_clock() - trace.started_at, firing.subject)
        firing.recorded = True
        if not record:
            return None
        firing.record = trace[-1]
        return firing.record

    def _record(self, event: _Firing) -> None:
        run = event.model
        wanted = "transition_finished" in run.observers.wanted
        firing = run.firing
        record = self._append(run, (firing.source, event.transition.definition.trigger, run.state), self._guards_of(run),
                              firing.detail, record=wanted)
        if record is not None:
            run.observers.notify(run, "transition_finished", record)

    def _fail(self, event: _Firing) -> None:
        run = event.model
        error: BaseException | None = event.error
        assert error is not None, "on_exception is called with the error"
        if isinstance(error, ObserverFailed):
            error = error.error
        if not isinstance(error, Exception):  # KeyboardInterrupt, CancelledError: the caller's to handle
            run.firing.interrupted = error
            raise error
        if isinstance(error, (NoTransitionEnabled, RunFinished, MachineError)):
            raise error  # a definition or usage error, not something the run did
        if not run.firing.recorded and run.state != run.firing.source:  # it failed after the state changed
            self._append(run, (run.firing.source, event.transition.definition.trigger, run.state), self._guards_of(run),
                         run.firing.detail, record=False)
        record = self._to_failure(run, error)
        if "transition_failed" in run.observers.wanted:
            try:
                run.observers.notify(run, "transition_failed", record, error)
            except Exception as also:  # the run has already failed; keep both, lose neither
                error.add_note(f"then {run.hook} raised {type(also).__name__}: {also}")
                _log.exception("%s raised while being told of a failure", run.hook)


def _fold(run: Run, outcome: StageOutcome) -> None:
    """Fold a stage's outcome into the run: the engine is the only writer of a run."""
    firing = run.firing
    firing.verdict, firing.detail, firing.subject = str(outcome.verdict), outcome.detail, outcome.subject
    if outcome.facts or outcome.counts:
        run.fold(outcome.facts, outcome.counts)
    if outcome.observe is not None:
        observe = outcome.observe  # the observation is the record's subject: the trace summarises its payload
        firing.subject = run.loop_state.record(observe[0], observe[1], observe[2], action=observe[3],
                                               repeat_of=observe[4] if len(observe) > 4 else None)
    elif outcome.observe_all:  # calls made together: each observed, in the order asked
        record = run.loop_state.record
        firing.subject = tuple(record(name, status, payload, action=action)
                               for name, status, payload, action in outcome.observe_all)


def _failure_detail(hook: str, error: BaseException) -> dict[str, Any]:
    return {"failed": hook or "engine", "error": error_text(error)}


class AsyncLoopEngine(LoopEngine):
    """The same definition on transitions' `AsyncMachine`: `await engine.afire(run)`."""

    asynchronous = True

    def fire(self, run: Run) -> TransitionRecord:
        raise WrongType("an AsyncLoopEngine fires with `await engine.afire(run)`")

    async def afire(self, run: Run) -> TransitionRecord:
        """`fire`, awaited. Raises as `fire` does; a cancelled run re-raises CancelledError."""
        await self.aadvance(run)
        return run.firing.record if run.firing.record is not None else run.trace[-1]

    def advance(self, run: Run) -> None:
        raise WrongType("an AsyncLoopEngine advances with `await engine.aadvance(run)`")

    def answer(self, run: Run) -> bool:
        raise WrongType("an AsyncLoopEngine asks with `await engine.aanswer(run)`")

    async def aanswer(self, run: Run) -> bool:
        """`answer`, awaited (an async performer's wait for a person)."""
        if run.state not in self._waiting:
            return False
        assert run.performer is not None, "AgentLoop.start gives every run its performer"
        return self.answered(run, await run_async(asked(run), run.performer))

    async def aadvance(self, run: Run) -> None:
        """`afire`, without making the record when nobody asked for one (what `arun()` uses)."""
        self._refuse_finished(run)
        await cast(Any, self.event).trigger(run)
        interrupted, run.firing.interrupted = run.firing.interrupted, None
        if interrupted is not None:
            raise interrupted


def engine_for(definition: MachineDefinition, stages: StageCatalog = BUILTIN_STAGES,
               callbacks: TransitionCallbacks = NO_CALLBACKS) -> LoopEngine:
    """The shared engine of `definition` with these stages and callbacks: built once, reused
    by every loop that runs it."""
    return _shared(LoopEngine, definition, stages, callbacks)


def async_engine_for(definition: MachineDefinition, stages: StageCatalog = BUILTIN_STAGES,
                     callbacks: TransitionCallbacks = NO_CALLBACKS) -> AsyncLoopEngine:
    """The shared async engine of `definition` with these stages and callbacks."""
    return cast(AsyncLoopEngine, _shared(AsyncLoopEngine, definition, stages, callbacks))


@lru_cache(maxsize=128)
def _shared(kind: type[LoopEngine], definition: MachineDefinition, stages: StageCatalog,
            callbacks: TransitionCallbacks) -> LoopEngine:
    return kind(definition, stages, callbacks)
