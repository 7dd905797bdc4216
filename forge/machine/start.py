"""How one run starts, as one value: `RunStart`, what `AgentLoop.start`, `run`, `arun` and
`debug` are given beside the loop, and what streams, replays, forks, child runs, durable
workflows and `forge serve` hand on (`forge.running.started` makes the run of it).

A module of its own, importing nothing at run time, so that `forge.loop` can check for a
`RunStart` without loading the machine's run model (`forge.machine.run`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from forge.agent.idempotency import IdempotencyRegistry
    from forge.agent.observations import LoopState
    from forge.machine.performers import Performer
    from forge.machine.run import Run
    from forge.observe import LoopObserver
    from forge.records.journal import Journal

__all__ = ["RUN_PLUMBING", "PerformerFactory", "RunStart"]

PerformerFactory = Callable[["Journal", "Run"], "Performer"]
"""`factory(journal, run) -> Performer`: how a run calls the world (see `AgentLoop.run`)."""


@dataclass(frozen=True, slots=True)
class RunStart:
    """How one run starts, beside the loop it is a run of: what `AgentLoop.start`, `run`,
    `arun` and `debug` are given, and what streams, replays and forks hand on, as one value
    rather than nine parameters through every layer. Checked by `forge.running.started`,
    not here (a replay or fork fills `goal` in from its journal).

    `observers` are told of this run only, after the loop's own; `state`, an earlier run's
    `result.state`, continues that conversation (the next turn, with a step budget of its
    own); `run_id` names the run in its trace (default: 32 random hex digits); `registry`
    replaces the loop's idempotency registry for this run; `performer(journal, run)` makes
    the `Performer` through which the run calls the world (default: the live one; a durable
    run's keeps its journal in the runs' database). `timed_out` names a waiting state whose
    deadline passed: the run starts there and its first transition is that state's
    `timeout` edge (what a durable run does when no answer came in time). `max_steps` lowers
    this run's step budget below the loop's (what a child run is given of its parent's,
    `as_tool`), and `token_budget` its token budget the same way; a larger one is the
    loop's.

    `loop.run(RunStart("copy todo.md", max_steps=2))` runs with two steps at most.
    """

    goal: str | None
    observers: tuple[LoopObserver, ...] = ()
    state: LoopState | None = None
    run_id: str | None = None
    registry: IdempotencyRegistry | None = None
    performer: PerformerFactory | None = None
    timed_out: str | None = None
    max_steps: int | None = None
    token_budget: int | None = None


RUN_PLUMBING = ("registry", "performer", "timed_out", "max_steps", "token_budget")
"""The parts of a `RunStart` beyond the goal, observers, state and run id: what
`AgentLoop.run(...)` took as keywords of their own before (deprecated there)."""
