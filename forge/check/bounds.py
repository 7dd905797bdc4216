"""Boundedness: explore every abstract run and prove each one ends within N transitions.

An abstract run is the machine state × the step count × the repetition counts (how many
distinct tools have been called how often, capped at `repeat_limit`), plus the last call's
status. Each stage action has an abstract model giving every verdict it could return from
there; the stop decision is computed by the real `StopController`, so the proof is about
the code that runs. Tools are unbounded (the worst case for repetition), so the policy may
pick any tool already used or a new one at every step.

Exploration is exhaustive over that space, which is finite while the step budget holds. If
it contains a cycle, or a path that executes more than `max_steps` tools (the budget is not
enforced), some run never ends and that path is the counterexample; otherwise the longest
path to a terminal state is the bound.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from forge.agent.stopping import StopController
from forge.machine.catalog import StageCatalog
from forge.machine.definition import MachineDefinition, TransitionDef
from forge.machine.stages import BUILTIN_STAGES

__all__ = ["ABSTRACT_MODELS", "AbstractRun", "Boundedness", "explore"]


@dataclass(frozen=True, slots=True)
class AbstractRun:
    state: str
    steps: int = 0
    counts: tuple[int, ...] = ()  # calls per distinct tool, descending, capped at repeat_limit
    pick: int | None = None  # the selected tool's index in counts; len(counts) means a new tool
    last: int = 0  # how often the last recorded tool has been called
    status: str | None = None
    fatal: bool = False


_Model = Callable[[AbstractRun, StopController], Iterator[tuple[str, AbstractRun]]]


def _select(run: AbstractRun, controller: StopController) -> Iterator[tuple[str, AbstractRun]]:
    for verdict in ("ambiguous", "no_tool", "policy_error"):
        yield verdict, run
    seen: set[int] = set()
    for index, count in enumerate(run.counts):
        if count not in seen:  # tools with equal counts are interchangeable
            seen.add(count)
            yield "selected", replace(run, pick=index)
            yield "finished", replace(run, pick=index, status="ok")  # an answer is recorded like a call
    yield "selected", replace(run, pick=len(run.counts))
    yield "finished", replace(run, pick=len(run.counts), status="ok")


def _call(run: AbstractRun, controller: StopController) -> Iterator[tuple[str, AbstractRun]]:
    for status in ("ok", "retryable_error", "fatal_error"):
        yield status, replace(run, status=status)


def _record(run: AbstractRun, controller: StopController) -> Iterator[tuple[str, AbstractRun]]:
    counts = list(run.counts)
    pick = len(counts) if run.pick is None else run.pick
    if pick == len(counts):
        counts.append(0)
    counts[pick] = min(counts[pick] + 1, controller.repeat_limit)
    last = counts[pick]
    yield "recorded", replace(
        run, steps=run.steps + 1, counts=tuple(sorted(counts, reverse=True)), pick=None, last=last,
        fatal=run.fatal or run.status == "fatal_error",
    )


def _history(run: AbstractRun) -> list[str]:
    """A concrete history with these counts whose last entry was called `run.last` times."""
    names = [f"tool{i}" for i in range(len(run.counts))]
    history = [name for name, count in zip(names, run.counts, strict=True) for _ in range(count)]
    if run.last:
        last = names[run.counts.index(run.last)]
        history.remove(last)
        history.append(last)
    return history


def _decide(run: AbstractRun, controller: StopController) -> Iterator[tuple[str, AbstractRun]]:
    options = (True, False) if run.status == "ok" else (False,)
    if run.status == "ok":
        yield "verify_error", run
    for verified in options:
        decision = controller.decide(run.steps, verified, run.fatal, _history(run))
        yield str(decision.reason), replace(run, status=None)


def _approve(run: AbstractRun, controller: StopController) -> Iterator[tuple[str, AbstractRun]]:
    for verdict in ("approved", "not_needed", "no_answer"):
        yield verdict, run
    yield "rejected", replace(run, status="retryable_error")  # recorded as an observation next


ABSTRACT_MODELS: dict[str, _Model] = {
    "select_tool": _select,
    "call_tool": _call,
    "request_approval": _approve,
    "record_observation": _record,
    "verify_and_decide": _decide,
}


def _any_verdict(verdicts: frozenset[str]) -> _Model:
    """A user stage's model: it may return any verdict it declares, and changes nothing the
    stop decision reads (it records no observation), so a cycle through user stages alone
    is caught as unbounded."""

    def model(run: AbstractRun, controller: StopController) -> Iterator[tuple[str, AbstractRun]]:
        for verdict in sorted(verdicts):
            yield verdict, run

    return model


@dataclass(frozen=True, slots=True)
class Boundedness:
    """`bound` is the most transitions any run can take, or None with a `counterexample`:
    the transitions of a path that returns to an abstract run it has already been in, or
    that executes more tools than `max_steps`."""

    max_steps: int
    repeat_limit: int
    bound: int | None
    explored: int
    counterexample: tuple[TransitionDef, ...] = ()
    over_budget: bool = False  # the counterexample outruns max_steps rather than cycling


def explore(definition: MachineDefinition, max_steps: int = 8, repeat_limit: int = 3,
            stages: StageCatalog = BUILTIN_STAGES) -> Boundedness:
    """Exhaustively explore `definition`'s abstract runs for these limits.

    Verdicts that no transition handles are skipped here (structure reports them).

    Raises:
        ValueError: a limit below 1 (from StopController).
    """
    controller = StopController(max_steps, repeat_limit)
    outgoing = {s.name: definition.outgoing(s.name) for s in definition.states}
    models = {
        s.name: ABSTRACT_MODELS.get(s.action) or _any_verdict(stages.actions[s.action].verdicts)
        for s in definition.states if s.action
    }
    terminal = {s.name for s in definition.states if s.terminal}

    def successors(run: AbstractRun) -> Iterator[tuple[TransitionDef, AbstractRun]]:
        model = models.get(run.state)
        results = model(run, controller) if model else iter([(None, run)])
        for verdict, after in results:
            for t in outgoing[run.state]:
                if t.guard is None or stages.guards[t.guard].verdict == verdict:
                    yield t, replace(after, state=t.dest)

    longest: dict[AbstractRun, int] = {}
    over_budget = False
    on_path: dict[AbstractRun, int] = {}
    path: list[TransitionDef] = []
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))

    def visit(run: AbstractRun) -> int | None:
        nonlocal over_budget
        if run.state in terminal:
            return 0
        if run in longest:
            return longest[run]
        if run in on_path:
            return None
        if run.steps > max_steps:
            over_budget = True
            return None
        on_path[run] = len(path)
        best = 0
        for transition, after in successors(run):
            path.append(transition)
            length = visit(after)
            if length is None:
                return None
            path.pop()
            best = max(best, length + 1)
        del on_path[run]
        longest[run] = best
        return best

    try:
        bound = visit(AbstractRun(definition.initial))
    finally:
        sys.setrecursionlimit(limit)
    if bound is None:
        return Boundedness(max_steps, repeat_limit, None, len(longest) + len(on_path), tuple(path), over_budget)
    return Boundedness(max_steps, repeat_limit, bound, len(longest))
