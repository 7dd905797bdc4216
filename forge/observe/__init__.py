"""The observer seam: one protocol that every driver (`run`, `arun`, `debug`) calls.

Logging (`forge.observe.log`, on by default), OpenTelemetry (`forge.observe.otel`, extra
`forge[otel]`) and `run(on_transition=...)` are all observers. An observer that raises
inside a transition ends the run in `fatal_error` like any other failing hook, with the
exception in `result.error` and the hook named in the trace's last record.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from forge.errors import WrongType

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from forge.agent.actions import Action
    from forge.agent.observations import LoopState
    from forge.policy import Intent
    from forge.records.journal import JournalEntry
    from forge.records.trace import TransitionRecord
    from forge.result import LoopResult


class RunView(Protocol):
    """What observers (and user callbacks) read of a run: a read-only view. The engine
    alone writes a run; an observer that wants to act on it returns nothing and raises
    to fail it (a `forge.machine.run.Run` is what is passed)."""

    @property
    def goal(self) -> str: ...

    @property
    def state(self) -> str: ...

    @property
    def machine(self) -> str: ...

    @property
    def step(self) -> int: ...

    @property
    def loop_state(self) -> LoopState: ...

    @property
    def trace(self) -> Sequence[TransitionRecord]: ...

    @property
    def journal(self) -> Sequence[JournalEntry]: ...

    @property
    def intent(self) -> Intent | None: ...

    @property
    def action(self) -> Action | None: ...

    @property
    def error(self) -> BaseException | None: ...

    @property
    def detail(self) -> Mapping[str, Any]: ...


class Firing(RunView, Protocol):
    """The run as the engine hands it to `Observers.notify`: observers see a `RunView`;
    the dispatcher notes in `hook` which observer failed, for the failure record."""

    hook: str


__all__ = ["LoopObserver", "Observers", "RunView", "ToolAttempt", "TransitionCallback"]


@dataclass(frozen=True, slots=True)
class ToolAttempt:
    """One call of a tool's handler within a step.

    `number` counts from 1; `delay_before` is the wait before it (0.0 for the first);
    `error` is what it raised, None when it returned; `call_id` is the model's id of the
    call (`Intent.call_id`), None for a call no model named.
    """

    tool: str
    number: int
    delay_before: float
    error: BaseException | None = None
    call_id: str | None = None


@runtime_checkable
class LoopObserver(Protocol):
    """What a run tells its observers, in order. Subclass it and override what you need:
    every method here does nothing.

    `run_started` before the first transition; `transition_started` as a transition begins
    in `state` (before its stage action); `tool_attempt_started` just before, and
    `tool_attempt` just after, each handler call of the execute stage (the first is what a
    tracer makes current while the handler runs); `transition_finished` once the record is in the trace;
    `transition_failed` when a hook raised and the run went to `fatal_error` (the record is
    that failure's); `run_finished` once the run is in a terminal state.
    """

    def run_started(self, run: RunView) -> None:
        return None

    def transition_started(self, run: RunView, state: str) -> None:
        return None

    def tool_attempt_started(self, run: RunView, attempt: ToolAttempt) -> None:
        return None

    def tool_attempt(self, run: RunView, attempt: ToolAttempt) -> None:
        return None

    def transition_finished(self, run: RunView, record: TransitionRecord) -> None:
        return None

    def transition_failed(self, run: RunView, record: TransitionRecord, error: BaseException) -> None:
        return None

    def run_finished(self, run: RunView, result: LoopResult) -> None:
        return None


class TransitionCallback(LoopObserver):
    """`on_transition(record)` as an observer: called after each fired transition."""

    def __init__(self, callback: Callable[[TransitionRecord], Any]) -> None:
        self.callback = callback

    def transition_finished(self, run: RunView, record: TransitionRecord) -> None:
        self.callback(record)


Bound = tuple[tuple[str, Callable[..., Any]], ...]
"""An observer hook's bound methods, each with the name a failure record gives it."""

_HOOKS = ("run_started", "transition_started", "tool_attempt_started", "tool_attempt", "transition_finished",
          "transition_failed", "run_finished")


class Observers:
    """The observers of one run, called in order. Each hook is bound once, and only for the
    observers that override it, so an unobserved run pays nothing per transition.

    `notify(run, hook, *args)` sets `run.hook` to name the observer that raised, so the
    failure is attributed to it; the caller decides what the failure means.
    """

    __slots__ = ("_bound", "_dynamic", "_skip", "_variants", "observers", "wanted")

    def __init__(self, observers: Iterable[LoopObserver] = (), skip: frozenset[tuple[int, str]] = frozenset()) -> None:
        self.observers = tuple(observers)
        self._skip = skip
        self._dynamic = tuple(i for i, o in enumerate(self.observers) if callable(getattr(o, "hooks_wanted", None)))
        self._variants: dict[tuple[frozenset[str], ...], Observers] = {}
        for observer in self.observers:
            if not any(callable(getattr(observer, hook, None)) for hook in _HOOKS):
                raise WrongType(f"{observer!r} is not a LoopObserver: it has none of {', '.join(_HOOKS)}")
        self._bound: dict[str, Bound] = {
            hook: tuple(
                (f"observer {type(o).__name__}.{hook}", getattr(o, hook))
                for i, o in enumerate(self.observers) if _overrides(o, hook) and (i, hook) not in skip
            )
            for hook in _HOOKS
        }
        self.wanted = frozenset(hook for hook, bound in self._bound.items() if bound)

    def __bool__(self) -> bool:
        return bool(self.observers)

    def for_run(self) -> Observers:
        """These observers as they want to be told of one run starting now: an observer with
        `hooks_wanted()` (the logging one: transitions only when its logger shows DEBUG) is
        asked once, here, so a hook nobody wants costs a run nothing."""
        if not self._dynamic:
            return self
        answers = tuple(self.observers[i].hooks_wanted() for i in self._dynamic)  # type: ignore[attr-defined]
        variant = self._variants.get(answers)
        if variant is None:
            skip = frozenset((i, hook) for i, wanted in zip(self._dynamic, answers, strict=True)
                             for hook in _HOOKS if hook not in wanted)
            variant = self._variants.setdefault(answers, Observers(self.observers, skip))
        return variant

    def __add__(self, more: Iterable[LoopObserver]) -> Observers:
        """These observers, then `more`; what these skip (a hook a run's observer did not
        want, `for_run`) stays skipped."""
        extra = tuple(more)
        return Observers((*self.observers, *extra), self._skip) if extra else self

    def bound(self, hook: str) -> Bound:
        """The `(name, method)` pairs `notify` calls for `hook`, in order (empty when no
        observer wants it): for a caller that tells the same hook on a hot path."""
        return self._bound[hook]

    def wants(self, hook: str) -> bool:
        """Whether any observer overrides `hook` (also: `hook in observers.wanted`)."""
        return hook in self.wanted

    def notify(self, run: Firing, hook: str, *args: Any) -> None:
        """Call `hook(run, *args)` on every observer that has it; exceptions propagate,
        with the observer's name left in `run.hook` for the engine's failure record."""
        for name, method in self._bound[hook]:
            try:
                method(run, *args)
            except BaseException:
                run.hook = name
                raise


    def finished(self, run: Firing, result: Any) -> None:
        """Tell every observer with `run_finished` that the run ended. The run has ended as
        it ended: an observer that raises is logged on the `forge` logger (with its
        traceback), never raised to the caller, and the others are still told."""
        for name, method in self._bound["run_finished"]:
            try:
                method(run, result)
            except Exception:
                logging.getLogger("forge").exception("%s raised; the run had ended in %s", name,
                                                     getattr(result, "reason", "?"))


def _overrides(observer: object, hook: str) -> bool:
    method = getattr(type(observer), hook, None)
    if method is None:
        return callable(getattr(observer, hook, None))
    return method is not getattr(LoopObserver, hook)
