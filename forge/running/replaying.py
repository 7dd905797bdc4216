"""A loop's recorded runs made again: a replay (calling nothing), a fork (the same up to a
transition, then live) and a debugger session over a fork — `AgentLoop.replay`, `fork` and
`debug_fork`, which are these.

They work on any `Replayable` (a loop with its spec, `forge.spec.LoopSpec`), starting its
run as any run is started, from a `forge.running.RunStart`, with a performer that answers
from the recorded journal (`forge.machine.performers.ReplayingPerformer`,
`ForkingPerformer`); the run is driven as any run is (`forge.running`). A recorded run's child runs are made again by the loops
its agent tools run (`forge.machine.child`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from forge.debug.session import SteppedLoop
from forge.errors import UsageError, WrongType
from forge.machine.child import calling, children_of
from forge.running import RunStart, begin, complete, finish, refuse_async, started

if TYPE_CHECKING:
    from forge.debug.session import DebugSession
    from forge.machine.child import ChildFork
    from forge.machine.fork import ForkPlan, Patch, RecordedRun
    from forge.machine.performers import ForkingPerformer, Masking, Performer, ReplayingPerformer
    from forge.machine.run import Run
    from forge.policy import Intent
    from forge.records.journal import Journal, JournalEntry
    from forge.result import ChildRun, LoopResult
    from forge.spec import LoopSpec

__all__ = ["DebuggedLoop", "ForkPoint", "Replayable", "debug_fork", "fork", "replay"]


class Replayable(Protocol):
    """What a replay or fork needs of a loop: its spec (its runs are started from it, with a
    performer of the replay's making)."""

    @property
    def spec(self) -> LoopSpec: ...


class DebuggedLoop(Replayable, SteppedLoop, Protocol):
    """A loop a debugger session over one of its forks steps (`debug_fork`)."""


@dataclass(frozen=True, slots=True)
class ForkPoint:
    """Where a fork leaves a recorded run (`AgentLoop.fork`): `source` (a `LoopResult`, a
    `RecordedRun` or a trace file's path) up to transition `at`, whose first call `patch`
    answers; with `child`, `at` and `patch` are of that child run of the source."""

    source: LoopResult | RecordedRun | str | os.PathLike[str]
    at: int | None
    patch: Patch | None = None
    child: str | None = None


def replay(loop: Replayable, journal: Sequence[JournalEntry] | str | Path, start: RunStart) -> LoopResult:
    """`AgentLoop.replay` (see there): `start.goal` None takes the recorded one; its
    `observers` and `state` are the replay's.

    Raises:
        JournalMiss, ValueError, OSError, TraceFormatError: as `AgentLoop.replay`.
    """
    from forge.machine.fork import goal_of

    if isinstance(journal, (str, os.PathLike)):
        read = _recorded(loop, journal)
        recorded: Sequence[JournalEntry] = read.journal
        children: Sequence[Any] = read.children
    else:
        recorded = journal
        children = tuple(child for child in getattr(journal, "children", ()) if hasattr(child, "result"))
    if start.goal is None:
        goal = goal_of(recorded)
        if goal is None:
            raise UsageError("the journal records no policy call to take the goal from: pass replay(..., goal=...)")
        start = replace(start, goal=goal)
    return _replay_of(loop, recorded, children, start)


def fork(loop: Replayable, point: ForkPoint, start: RunStart) -> LoopResult:
    """`AgentLoop.fork` (see there): `start.goal` None takes the recorded one; its
    `observers`, `state`, `run_id` and `max_steps` are the fork's.

    Raises:
        PatchRefused, JournalMiss, OSError, TraceFormatError, AsyncNotSupported: as
            `AgentLoop.fork`.
    """
    refuse_async(loop.spec)
    run, plan, performer = _forked(loop, point, start)
    _replay_to_end(loop.spec, run, performer, unreplayed_is_a_miss=plan.at is not None)
    if plan.at is None:
        run.journal.forked_from = replace(plan.origin, transition=performer.went_live or len(run.trace))
    run.trace.forked_from = run.journal.forked_from
    return finish(loop.spec, run)


def debug_fork(loop: DebuggedLoop, point: ForkPoint, start: RunStart) -> DebugSession:
    """`AgentLoop.debug_fork` (see there).

    Raises:
        PatchRefused, JournalMiss, OSError, TraceFormatError, AsyncNotSupported: as `fork`.
    """
    from forge.debug.session import DebugSession
    from forge.machine.performers import ReplayStopped

    refuse_async(loop.spec)
    run, plan, _ = _forked(loop, point, start)
    begin(loop.spec, run)
    session = DebugSession(loop, run)
    try:
        for _ in range((plan.at or 1) - 1):
            session.step()
    except ReplayStopped as stopped:
        raise stopped.miss from None
    return session


def _replay_of(loop: Replayable, recorded: Sequence[JournalEntry], children: Sequence[ChildRun],
               start: RunStart) -> LoopResult:
    """A replay of `recorded` (see `replay`) started as `start` says (its goal given), whose
    tools made the child runs `children`."""
    from forge.agent.idempotency import IdempotencyRegistry
    from forge.machine.performers import Recording, ReplayingPerformer

    replaying: list[ReplayingPerformer] = []

    def answering(journal: Journal, run: Run) -> ReplayingPerformer:
        replaying.append(ReplayingPerformer(Recording(recorded, masked=_masking(loop.spec, run), children=children),
                                            journal, run))
        return replaying[0]

    # a registry of its own: a side effect recorded as run is replayed from the journal, not the registry
    run = started(loop.spec, replace(start, run_id=recorded[0].run_id if len(recorded) else None,
                                     registry=IdempotencyRegistry(), performer=answering))
    _replay_to_end(loop.spec, run, replaying[0], unreplayed_is_a_miss=True)
    return finish(loop.spec, run)


def _replay_to_end(spec: LoopSpec, run: Run, performer: ReplayingPerformer, unreplayed_is_a_miss: bool) -> None:
    """Fire `run`, whose `performer` answers from a recorded journal, to its end.

    Raises:
        JournalMiss: the run made a call the journal does not have where it was due, or
            (`unreplayed_is_a_miss`) it ended with recorded calls not yet made.
    """
    from forge.machine.performers import ReplayStopped
    from forge.records.journal import JournalMiss

    try:
        with calling(run):
            complete(spec, run)
    except ReplayStopped as stopped:
        raise stopped.miss from None
    performer.replayed_children(len(run.trace) + 1)
    if unreplayed_is_a_miss and performer.remaining:
        raise JournalMiss(performer.recorded[len(performer.recorded) - performer.remaining], None, run.state)


def _forked(loop: Replayable, point: ForkPoint, start: RunStart) -> tuple[Run, ForkPlan, ForkingPerformer]:
    """A new run of a fork at `point` (see `fork`), not yet started."""
    from forge.agent.idempotency import IdempotencyRegistry
    from forge.machine.performers import ForkingPerformer, Recording

    source, at, patch = _recorded(loop, point.source), point.at, point.patch
    child_fork = None
    if point.child is not None:
        child_fork = _child_fork(loop, source, point.child, at, patch)
        at, patch = child_fork.transition, None
    plan = _fork_plan(loop.spec, source, at, patch, start.goal)
    forking: list[ForkingPerformer] = []

    def forks(journal: Journal, run: Run) -> Performer:
        journal.forked_from = run.trace.forked_from = plan.origin
        recording = Recording(plan.replayed, plan.patched, plan.origin.patch, _masking(loop.spec, run),
                              source.children)
        forking.append(ForkingPerformer(recording, journal, run, plan.at, plan.pending))
        forking[0].child_fork = child_fork
        return forking[0]

    run = started(loop.spec, replace(start, goal=plan.goal, registry=IdempotencyRegistry(), performer=forks))
    return run, plan, forking[0]


def _recorded(loop: Replayable, source: LoopResult | RecordedRun | str | os.PathLike[str]) -> LoopResult | RecordedRun:
    """A fork's source as a recorded run, read from its file (children too) if a path;
    each child run read from a file made again by replaying it with its loop, so it is a
    `ChildRun` with its whole `LoopResult`."""
    from forge.machine.fork import RecordedRun, read_recorded
    from forge.result import LoopResult

    if isinstance(source, (str, os.PathLike)):
        source = read_recorded(source, loop.spec.options.hooks.codec)
    if isinstance(source, RecordedRun):
        return replace(source, children=_child_runs(loop, source.children))
    if isinstance(source, LoopResult):
        return source
    raise WrongType(f"fork() takes a LoopResult or a trace file's path, got {type(source).__name__}")


def _child_runs(loop: Replayable, children: Sequence[Any]) -> tuple[ChildRun, ...]:
    """Recorded child runs as `ChildRun`s: one read from a file (a `RecordedChild`) is
    replayed by the loop its tool runs; one whose tool is not an agent tool of this
    loop, or runs an asynchronous loop, is left out (this loop does not make it)."""
    from forge.machine.fork import goal_of
    from forge.result import ChildRun

    made = []
    for child in children:
        if isinstance(child, ChildRun):
            made.append(child)
            continue
        child_loop = children_of(loop.spec).get(child.tool)
        if child_loop is None or child_loop.spec.async_parts:
            continue
        recorded = child.result
        result = _replay_of(child_loop, recorded.journal, _child_runs(child_loop, recorded.children),
                            RunStart(goal_of(recorded.journal) or "(the journal records no goal)"))
        made.append(ChildRun(child.path, child.tool, child.transition, result))
    return tuple(made)


def _fork_plan(spec: LoopSpec, source: LoopResult | RecordedRun, at: int | None, patch: Patch | None,
               goal: str | None) -> ForkPlan:
    """What a fork of `source` at `at` replays (see `forge.machine.fork.fork_plan`).

    Raises:
        PatchRefused, ValueError: as `fork_plan`; the source has no journal.
    """
    from forge.machine.fork import ForkSource, fork_plan

    recorded, records = source.journal, source.trace
    if not len(recorded) and (goal is None or len(records)):
        raise UsageError("the source has no journal to fork from: fork a LoopResult of AgentLoop.run, or a "
                         "trace written with write_trace(result.trace, path, journal=result.journal)")
    definition = spec.definition
    before = records[-1].dest if records else definition.initial
    state_before = next((s for s in definition.states if s.name == before), None)
    next_action = state_before.action if state_before is not None and not state_before.terminal else None
    return fork_plan(ForkSource(recorded, len(records), getattr(recorded, "run_id", ""), goal, next_action), at, patch,
                     spec.config.tools)


def _child_fork(loop: Replayable, source: LoopResult | RecordedRun, child: str, at: int | None,
                patch: Patch | None) -> ChildFork:
    """The fork of `source`'s child run `child` at `at` with `patch`, checked against the
    child's loop (and so on down, for a grandchild) before anything runs.

    Raises:
        PatchRefused: no such child run, or `at` / `patch` do not fit it.
        AsyncNotSupported: the child's loop is asynchronous (a fork runs synchronously).
    """
    from forge.machine.child import ChildFork
    from forge.machine.fork import PatchRefused, recorded_child

    recorded, within = recorded_child(source, child)
    child_loop = children_of(loop.spec).get(recorded.tool)
    if child_loop is None and recorded.tool in loop.spec.config.handoffs:
        raise PatchRefused(f"child run {recorded.path!r} is a handoff to {recorded.tool!r}: a fork inside a loop "
                           f"handed to is not offered yet; fork this run at its handing transition "
                           f"{recorded.transition}")
    if child_loop is None:
        raise PatchRefused(f"child run {recorded.path!r} was made by tool {recorded.tool!r}, which is not one of "
                           f"this loop's agent tools ({', '.join(sorted(children_of(loop.spec))) or 'none'})")
    refuse_async(child_loop.spec)
    if within is None:
        _fork_plan(child_loop.spec, recorded.result, at, patch, None)
    else:
        _child_fork(child_loop, recorded.result, within, at, patch)
    return ChildFork(recorded.path.rsplit("/", 1)[1], recorded.transition, recorded.result, at, patch, within)


def _masking(spec: LoopSpec, run: Run) -> Masking | None:
    """How a replay of `run` masks a call it made to compare it with one a file written
    with the loop's `redact` keeps (None without `redact`)."""
    config = spec.config
    redact = config.redact
    if redact is None:
        return None
    from forge.machine.redaction import masked_entry
    from forge.machine.stages.select_tool import chosen_tool

    def chosen(intent: Intent) -> str | None:
        return chosen_tool(intent, config.specs)

    def masked(entry: JournalEntry, step_calls: Sequence[JournalEntry]) -> JournalEntry:
        return masked_entry(entry, step_calls, redact, run.trace, chosen)

    return masked
