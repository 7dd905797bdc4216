"""How a run of a loop's spec (`forge.spec.LoopSpec`) is started and driven to its end:
made from one `RunStart` (`forge.machine.start`: the goal and the run's plumbing, one
value), its observers told it started, fired transition by transition to a terminal state,
told it finished, and its `LoopResult` made.

`AgentLoop.start`, `run`, `arun` and `debug`, streams (`forge.running.stream`), replays and forks
(`forge.running.replaying`) all start their runs with `started` and drive them with these.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from forge.agent.observations import LoopState
from forge.errors import UsageError
from forge.machine.child import calling, finished_children
from forge.machine.start import RUN_PLUMBING, PerformerFactory, RunStart
from forge.records.effects import SYNCHRONOUS

if TYPE_CHECKING:
    from forge.machine.performers import Performer
    from forge.machine.run import Run, RunCounts
    from forge.records.journal import Journal
    from forge.records.trace import Trace
    from forge.result import LoopResult
    from forge.spec import LoopSpec

__all__ = ["RUN_PLUMBING", "PerformerFactory", "RunStart", "arun_through", "begin", "complete", "finish", "refuse_async",
           "result_of", "run_through", "started", "trace_file_name"]


@functools.cache
def _run_parts() -> tuple[type[Journal], type[Performer], type[Run], type[RunCounts], type[Trace]]:
    """What `started` makes a run of, imported on the first run rather than with forge
    (and looked up once: an import statement per run costs a few microseconds)."""
    from forge.machine.performers import Performer
    from forge.machine.run import Run, RunCounts
    from forge.records.journal import Journal
    from forge.records.trace import Trace

    return Journal, Performer, Run, RunCounts, Trace


def started(spec: LoopSpec, start: RunStart) -> Run:
    """A new run of `spec` as `start` says, in its first state; nothing has fired yet
    (`AgentLoop.start`).

    Raises:
        ValueError: as `AgentLoop.start`.
    """
    Journal, Performer, Run, RunCounts, Trace = _run_parts()
    definition = spec.definition
    goal, run_id, timed_out, registry = start.goal, start.run_id, start.timed_out, start.registry
    if not isinstance(goal, str) or not goal.strip():
        raise UsageError("goal must be a non-blank string")
    if spec.unhanded:
        raise UsageError(f"definition {definition.name!r} allows handoffs to "
                         f"{', '.join(map(repr, spec.unhanded))}, which this loop has no loop for: "
                         "loop.with_handoffs(NAME=other_loop)")
    if timed_out is not None and definition.timeout_edge(timed_out) is None:
        raise UsageError(f"state {timed_out!r} of {definition.name!r} has no timeout edge to take")
    if run_id is None:
        run_id = os.urandom(16).hex()
    elif not isinstance(run_id, str) or not run_id.strip():
        raise UsageError(f"run_id must be a non-blank string, got {run_id!r}")
    if registry is None:
        from forge.agent.idempotency import IdempotencyRegistry

        shared = spec.given["registry"]
        registry = shared if shared is not None else IdempotencyRegistry()
    loop_state = _state_of(start.state)
    journal = Journal(run_id=run_id, codec=spec.options.hooks.codec)
    redact = spec.config.redact
    if redact is not None:  # what write_trace writes of the journal: masked as the records were
        from forge.machine.redaction import redacted_journal

        journal.masking = lambda entries, records: redacted_journal(entries, redact, records)
    run = Run(goal=goal, config=spec.config, state=timed_out or definition.initial, registry=registry,
              loop_state=loop_state,
              counts=RunCounts(messages_seen=len(loop_state.messages), steps_before=loop_state.turn_start,
                               first_message=len(loop_state.messages)),
              observers=spec.observers.for_run() + start.observers,
              trace=Trace(machine=definition.name, run_id=run_id, started_at=time.time(), redact=redact),
              journal=journal)
    config = run.config = spec.lowered(start.max_steps, start.token_budget)
    run.performer = (start.performer(journal, run) if start.performer is not None
                     else Performer(journal, run, config.sleep, config.async_sleep))
    return run


def _state_of(state: LoopState | None) -> LoopState:
    """The loop state a run starts from: a new one, or the next turn of `state`'s conversation."""
    return LoopState() if state is None else state.continued()


def run_through(spec: LoopSpec, start: RunStart) -> LoopResult:
    """A run of `spec` started as `start` says, fired to its end (`AgentLoop.run`).

    Raises:
        ValueError, AsyncNotSupported, JournalMiss: as `AgentLoop.run`.
    """
    from forge.machine.performers import ReplayStopped

    refuse_async(spec)
    run = started(spec, start)
    try:
        with calling(run):
            complete(spec, run)
    except ReplayStopped as stopped:
        raise stopped.miss from None
    return finish(spec, run)


async def arun_through(spec: LoopSpec, start: RunStart) -> LoopResult:
    """`run_through`, awaited, on the async engine (`AgentLoop.arun`).

    Raises:
        ValueError, JournalMiss, asyncio.CancelledError: as `AgentLoop.arun`.
    """
    from forge.machine.engine import async_engine_for
    from forge.machine.performers import ReplayStopped

    run = started(spec, start)
    engine = async_engine_for(spec.definition, spec.stages, spec.callbacks)
    try:
        with calling(run):
            begin(spec, run)
            while True:
                while not engine.is_terminal(run):
                    await engine.aadvance(run)
                if not await engine.aanswer(run):
                    break
    except ReplayStopped as stopped:
        raise stopped.miss from None
    return finish(spec, run)


def begin(spec: LoopSpec, run: Run) -> None:
    """Tell the observers the run started. One that raises ends the run in fatal_error
    before any transition (the `fail` edge from the initial state, naming it), as a
    failing observer does inside a transition; the caller is not the one to hear of it.
    A run started anywhere but the initial state was started by a deadline that passed
    (`timed_out`): it then takes that state's timeout edge."""
    try:
        run.observers.notify(run, "run_started")
    except Exception as error:
        spec.engine.fail_outside(run, error)
        return
    if run.state != spec.definition.initial:
        spec.engine.time_out(run)


def complete(spec: LoopSpec, run: Run) -> None:
    """Begin the run, and fire it to a terminal state where nobody answers (see
    `forge.machine.asking`). The whole run is synchronous (`SYNCHRONOUS`, set once here
    rather than around each action)."""
    synchronous = SYNCHRONOUS.set(True)
    try:
        begin(spec, run)
        engine = spec.engine
        while True:
            while not engine.is_terminal(run):
                engine.advance(run)
            if not engine.answer(run):
                return
    finally:
        SYNCHRONOUS.reset(synchronous)


def finish(spec: LoopSpec, run: Run) -> LoopResult:
    """The finished run's result, once its observers are told; its trace kept in the
    folder `FORGE_TRACE_DIR` names, if set (what `forge cover` reads)."""
    result = result_of(spec, run)
    run.observers.finished(run, result)
    kept = os.environ.get("FORGE_TRACE_DIR")
    if kept:
        _keep_trace(Path(kept), run.trace)
    return result


def refuse_async(spec: LoopSpec) -> None:
    """Refuse to run `spec` synchronously when a part of it is an `async def`.

    Raises:
        AsyncNotSupported: naming the first such part.
    """
    from forge.records.effects import AsyncNotSupported

    if spec.async_parts:
        raise AsyncNotSupported(spec.async_parts[0], declared=True)


def result_of(spec: LoopSpec, run: Run) -> LoopResult:
    """The `LoopResult` of a finished run. Raises ValueError if it has not finished."""
    from forge.records.usage import usage_of, with_children, with_sampled
    from forge.result import LoopResult

    if not spec.engine.is_terminal(run):
        raise UsageError(f"the run has not finished; it is in state {run.state!r}")
    children = finished_children(run)
    return LoopResult(
        reason=run.state,
        steps=run.loop_state.step_count - run.counts.steps_before,
        state=run.loop_state,
        trace=run.trace,
        error=run.error,
        outcome=spec.definition.state(run.state).outcome,
        retries=run.retries,
        side_effects_run=run.side_effects_run,
        side_effects_replayed=run.side_effects_replayed,
        definition=spec.definition,
        journal=run.journal,
        html_view=_inspector,
        question=run.facts.question,
        usage=with_children(with_sampled(usage_of(run.loop_state.messages, run.first_message), run.journal), children),
        children=children,
        wrap_up=run.facts.wrap_up,
    )


def _keep_trace(folder: Path, trace: Trace) -> None:
    """Write a finished run's trace to `folder` (what `FORGE_TRACE_DIR` asks, for `forge
    cover`) as RUN_ID.jsonl, or RUN_ID.N.jsonl when a run of that id was kept already (a
    durable run's next turn); RUN_ID is the run id made a safe file name (`trace_file_name`),
    so no run id writes outside `folder`. Never fails the run: a folder it cannot write to
    is logged."""
    from forge.records.trace import write_trace

    try:
        folder.mkdir(parents=True, exist_ok=True)
        name = trace_file_name(trace.run_id)
        path, number = folder / f"{name}.jsonl", 1
        while path.exists():
            number += 1
            path = folder / f"{name}.{number}.jsonl"
        write_trace(trace, path)
    except (OSError, ValueError) as error:
        logging.getLogger("forge").warning("FORGE_TRACE_DIR: cannot keep the trace of run %r: %s", trace.run_id, error)


def trace_file_name(run_id: str) -> str:
    """`run_id` as one file name that stays in its folder: percent-encoded but for letters,
    digits, `_`, `-` and inner dots (so `../x`, `/etc/x`, a NUL byte or a lone surrogate
    cannot escape or fail), and a long id cut, with a hash of the whole kept, to fit 200
    bytes. An id made of those characters only is its own file name."""
    import hashlib
    from urllib.parse import quote

    encoded = quote(run_id.encode("utf-8", "surrogatepass"), safe="-_.")
    if encoded.startswith("."):
        encoded = "%2E" + encoded[1:]
    if len(encoded) > 200:
        encoded = f"{encoded[:150]}~{hashlib.sha256(encoded.encode()).hexdigest()[:16]}"
    return encoded


def _inspector(result: LoopResult) -> str:
    """A run's inspector page as a notebook fragment (imported when a notebook asks)."""
    from forge.inspect import html

    return html(result, fragment=True)
