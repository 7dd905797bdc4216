"""Boundedness and stage order: explore every abstract run, prove each ends within N
transitions, and that no stage runs without what it needs from the ones before it.

An abstract run (`forge.records.abstract`) is the machine state × the step count × how often
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
from forge.machine.catalog import StageCatalog
from forge.machine.stages import BUILTIN_STAGES
from forge.records.abstract import NEEDS, AbstractModel, AbstractRun
from forge.records.definition import MachineDefinition, TransitionDef

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
    return _Search(definition, StopController(max_steps, repeat_limit), stages).run(progress, every)


_Frame = tuple[AbstractRun, Iterator[tuple[TransitionDef | str, AbstractRun]], int]
"""A run on the search's path, its successors not yet explored, and the longest run after it so far."""


class _Search:
    """A depth-first search of a definition's abstract runs for a controller's limits: the
    longest run to a terminal state, or the path that shows there is none (a cycle, a run
    past the step budget, a stage that cannot run)."""

    def __init__(self, definition: MachineDefinition, controller: StopController, stages: StageCatalog) -> None:
        self.controller, self.stages = controller, stages
        self.max_steps, self.repeat_limit = controller.max_steps, controller.repeat_limit
        self.models = {s.name: stages.actions[s.action].abstract for s in definition.states if s.action}
        self.actions = {s.name: s.action for s in definition.states if s.action}
        self.terminal = {s.name for s in definition.states if s.terminal}
        self.routes: dict[str, dict[str | None, list[TransitionDef]]] = {}
        for t in definition.transitions:
            verdict = stages.guards[t.guard].verdict if t.guard else None
            self.routes.setdefault(t.source, {}).setdefault(verdict, []).append(t)
        self.start = AbstractRun(definition.initial)
        self.longest: dict[AbstractRun, int] = {}
        self.on_path: dict[AbstractRun, int] = {self.start: 0}
        self.path: list[TransitionDef] = []
        self.stack: list[_Frame] = []

    def successors(self, run: AbstractRun) -> Iterator[tuple[TransitionDef | str, AbstractRun]]:
        model = self.models.get(run.state)
        results = model(run, self.controller) if model else iter([(None, run)])
        by_verdict = self.routes.get(run.state, {})
        for verdict, after in results:
            if verdict == NEEDS:
                yield NEEDS, after
                continue
            for t in (*by_verdict.get(verdict, ()), *by_verdict.get(None, ())):
                yield t, replace(after, state=t.dest)

    def failed(self, **why: object) -> Boundedness:
        return Boundedness(self.max_steps, self.repeat_limit, None, len(self.longest) + len(self.on_path),
                           tuple(self.path), **why)  # type: ignore[arg-type]

    def run(self, progress: Callable[[int], None] | None, every: float) -> Boundedness:
        if self.start.state in self.terminal:
            return Boundedness(self.max_steps, self.repeat_limit, 0, 0)
        self.stack.append((self.start, self.successors(self.start), 0))
        started, reported = time.monotonic(), 0.0
        while self.stack:
            ended = self._deeper()
            if isinstance(ended, Boundedness):
                return ended
            if ended and progress is not None and time.monotonic() - started - reported >= every:
                reported = time.monotonic() - started
                progress(len(self.longest))
        return Boundedness(self.max_steps, self.repeat_limit, self.longest[self.start], len(self.longest))

    def _deeper(self) -> Boundedness | bool:
        """One move of the search from the run on top of the stack: down to its next
        successor not yet known (False), or, with none left, back up (True); a verdict when
        the path shows the definition unbounded."""
        run, children, best = self.stack[-1]
        for edge, after in children:
            if isinstance(edge, str):  # the stage here cannot run
                needed = self.stages.actions[self.actions[run.state]].needs or edge
                return self.failed(needs=f"{run.state}: {self.actions[run.state]} needs {needed}")
            if after.state in self.terminal:
                best = max(best, 1)
                continue
            known = self.longest.get(after)
            if known is not None:
                best = max(best, known + 1)
                continue
            self.path.append(edge)
            if after in self.on_path:
                return self.failed()
            if after.steps > self.max_steps:
                return self.failed(over_budget=True)
            self.stack[-1] = (run, children, best)
            self.on_path[after] = len(self.path)
            self.stack.append((after, self.successors(after), 0))
            return False
        self._back_up(run, best)
        return True

    def _back_up(self, run: AbstractRun, best: int) -> None:
        """`run` explored: its longest run known, and its parent's updated."""
        self.stack.pop()
        del self.on_path[run]
        self.longest[run] = best
        if self.stack:
            parent, siblings, parent_best = self.stack[-1]
            self.stack[-1] = (parent, siblings, max(parent_best, best + 1))
            self.path.pop()
