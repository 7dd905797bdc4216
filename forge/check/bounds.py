"""Boundedness and stage order: explore every abstract run, prove each ends within N
transitions, and that no stage runs without what it needs from the ones before it.

An abstract run (`forge.machine.abstract`) is the machine state × the step count × how often
the picked call has been made before (capped at `repeat_limit`) × the last call's count once
recorded × the last call's status, plus what the stages have produced since the last decision.
Each stage object carries its model (`ActionSpec.model`); a user stage's may give any verdict
it declares. The stop decision is computed by the real
`StopController`, so the proof is about the code that runs. Calls are unbounded (the worst
case for repetition): the policy may pick a new call, or one made before any number of times
below the limit (a call made `repeat_limit` times has already stopped the run). That space
grows linearly with `max_steps`, and it is finite while the step budget holds.

The search is iterative (no recursion, whatever `max_steps`): a cycle, or a path that records
more than `max_steps` observations, is a run that never ends, and the path is the
counterexample; a stage reached without what it needs (`call_tool` with nothing selected,
`record_observation` with nothing to record, `verify_and_decide` with nothing recorded) is a
run that would fail, and that path is reported too. Otherwise the longest path to a terminal
state is the bound.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace

from forge.agent.stopping import StopController
from forge.machine.abstract import NEEDS, AbstractModel, AbstractRun
from forge.machine.catalog import StageCatalog
from forge.machine.definition import MachineDefinition, TransitionDef
from forge.machine.stages import BUILTIN_STAGES

__all__ = ["ABSTRACT_MODELS", "AbstractRun", "Boundedness", "explore"]

ABSTRACT_MODELS: Mapping[str, AbstractModel] = {
    name: spec.model for name, spec in BUILTIN_STAGES.actions.items() if spec.model is not None
}
"""The built-in stages' models, by action name (each stage object carries its own)."""


@dataclass(frozen=True, slots=True)
class Boundedness:
    """`bound` is the most transitions any run can take, or None with a `counterexample`:
    the transitions of a path that returns to an abstract run it has already been in, that
    records more than `max_steps` observations (`over_budget`), or that reaches a stage
    without what it needs (`needs` names the state and what it lacked)."""

    max_steps: int
    repeat_limit: int
    bound: int | None
    explored: int
    counterexample: tuple[TransitionDef, ...] = ()
    over_budget: bool = False
    needs: str = ""


def explore(definition: MachineDefinition, max_steps: int = 8, repeat_limit: int = 3,
            stages: StageCatalog = BUILTIN_STAGES, progress: Callable[[int], None] | None = None,
            every: float = 1.0) -> Boundedness:
    """Exhaustively explore `definition`'s abstract runs for these limits.

    Verdicts that no transition handles are skipped here (structure reports them).
    `progress(explored)` is called every `every` seconds while the search goes on.

    Raises:
        ValueError: a limit below 1 (from StopController).
    """
    controller = StopController(max_steps, repeat_limit)
    models = {s.name: stages.actions[s.action].abstract for s in definition.states if s.action}
    actions = {s.name: s.action for s in definition.states if s.action}
    terminal = {s.name for s in definition.states if s.terminal}
    routes: dict[str, dict[str | None, list[TransitionDef]]] = {}
    for t in definition.transitions:
        verdict = stages.guards[t.guard].verdict if t.guard else None
        routes.setdefault(t.source, {}).setdefault(verdict, []).append(t)

    def successors(run: AbstractRun) -> Iterator[tuple[TransitionDef | str, AbstractRun]]:
        model = models.get(run.state)
        results = model(run, controller) if model else iter([(None, run)])
        by_verdict = routes.get(run.state, {})
        for verdict, after in results:
            if verdict == NEEDS:
                yield NEEDS, after
                continue
            for t in (*by_verdict.get(verdict, ()), *by_verdict.get(None, ())):
                yield t, replace(after, state=t.dest)

    longest: dict[AbstractRun, int] = {}
    start = AbstractRun(definition.initial)
    on_path: dict[AbstractRun, int] = {start: 0}
    path: list[TransitionDef] = []
    stack: list[tuple[AbstractRun, Iterator[tuple[TransitionDef | str, AbstractRun]], int]] = []
    started, reported = time.monotonic(), 0.0

    def failed(**why: object) -> Boundedness:
        return Boundedness(max_steps, repeat_limit, None, len(longest) + len(on_path), tuple(path), **why)  # type: ignore[arg-type]

    if start.state in terminal:
        return Boundedness(max_steps, repeat_limit, 0, 0)
    stack.append((start, successors(start), 0))
    while stack:
        run, children, best = stack[-1]
        for edge, after in children:
            if isinstance(edge, str):  # the stage here cannot run
                needed = stages.actions[actions[run.state]].needs or edge
                return failed(needs=f"{run.state}: {actions[run.state]} needs {needed}")
            if after.state in terminal:
                best = max(best, 1)
                continue
            known = longest.get(after)
            if known is not None:
                best = max(best, known + 1)
                continue
            path.append(edge)
            if after in on_path:
                return failed()
            if after.steps > max_steps:
                return failed(over_budget=True)
            stack[-1] = (run, children, best)
            on_path[after] = len(path)
            stack.append((after, successors(after), 0))
            break
        else:
            stack.pop()
            del on_path[run]
            longest[run] = best
            if stack:
                parent, siblings, parent_best = stack[-1]
                stack[-1] = (parent, siblings, max(parent_best, best + 1))
                path.pop()
            if progress is not None and time.monotonic() - started - reported >= every:
                reported = time.monotonic() - started
                progress(len(longest))
    return Boundedness(max_steps, repeat_limit, longest[start], len(longest))
