"""A run as a stream of events (`AgentLoop.stream`, `AgentLoop.astream`; the events are in
`forge.events`).

The run is the ordinary one — the same definition, stages, journal and trace as `run`/`arun`
make — with one more observer, which hands each transition and tool attempt to the consumer,
and a `forge.events.sink` set for its model calls, through which a model policy streams its
reply. `stream` runs it in a thread of its own, under a copy of the context of the code
iterating it (its context variables: a tracer's current span, a request's id), and yields
from a queue; `astream` runs `arun` as a task of the caller's event loop (its events reach
the consumer each time the run awaits — a tool, a model, a sleep — and before each tool
call, where the run yields to the loop once: a plain tool's handler starts in its worker
thread as soon as it is handed over). A
model call the journal answers (a replay) gives its reply's deltas from the journal.

A consumer that stops early (breaks out of the loop, or closes the stream) stops the run
before its next call to the world (a tool's handler, a model): it ends in `fatal_error` with
`StreamClosed`, after the call under way has finished, and closing waits for that. A run
that makes no more call ends as it would have (its transitions in between are pure and
take microseconds). The run does not wait for its consumer: one slower than the run reads
events of calls already made, and stopping stops the calls the run has not reached yet
(holding each call until the consumer has read up to it would cost a hand-over between the
two threads per call: 2-3x a plain run per step on two cores, measured).
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from forge.events import (
    ModelCallStarted,
    RunFinished,
    RunStarted,
    StreamClosed,
    StreamEvent,
    ToolAttemptFinished,
    ToolAttemptStarted,
    TransitionFired,
    WaitingOn,
    listening,
    replayed_deltas,
)
from forge.observe import LoopObserver, RunView, ToolAttempt
from forge.running import RunStart, arun_through, run_through
from forge.running.replaying import Replayable, replay

__all__ = ["astream", "stream"]

_END = object()


class _Failed:
    """What the run raised instead of ending (a journal miss, an async part under `run`)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class _Relay(LoopObserver):
    """The observer that hands the run's events to `put`: `(count, event)`, an event after
    the trace's first `count` records, or the event alone where the trace got no record
    since the event before (a tool attempt's end follows its start); once `closed` is true,
    it stops the run before its next call.

    The consumer's side makes the `TransitionFired` events from those counts (`_Handed`):
    a transition costs the run no event, no record and no word to this observer, so that
    a streamed run costs about what a run does."""

    def __init__(self, put: Callable[[Any], None]) -> None:
        self.put = put
        self.closed = False  # set by the consumer's side, read before each call in the run's thread
        self.trace: Sequence[Any] = ()
        self.count: Callable[[], int] = self.trace.__len__
        self.journal: Sequence[Any] = ()
        self.streamed = 0  # model calls whose deltas came live from the policy, not yet seen in the journal
        self.seen = 0  # journal entries looked at for replayed model calls
        self._told: dict[str, tuple[ToolAttemptStarted, ToolAttemptFinished]] = {}

    def run_started(self, run: RunView) -> None:
        self.trace, self.journal = run.trace, run.journal
        self.count = getattr(run.trace, "length", None) or run.trace.__len__
        self.put((self.count(), RunStarted(str(getattr(run.trace, "run_id", "")), run.goal)))

    def live(self, event: StreamEvent) -> None:
        """The sink of the run's model calls: deltas as the model makes them."""
        if isinstance(event, ModelCallStarted):
            self.before_call("model", event.model)
            self.streamed += 1
        self.put((self.count(), event))

    __call__ = live  # the sink itself (`forge.events.listening`)

    def tool_attempt_started(self, run: RunView, attempt: ToolAttempt) -> None:
        if self.closed:
            self._refuse(f"before a call of tool {attempt.tool!r}")
        self.put((self.count(), self._events_of(attempt)[0]))

    def tool_attempt(self, run: RunView, attempt: ToolAttempt) -> None:
        told = self._told.get(attempt.tool)
        self.put(told[1] if told is not None and told[1].attempt is attempt else ToolAttemptFinished(attempt))

    def _events_of(self, attempt: ToolAttempt) -> tuple[ToolAttemptStarted, ToolAttemptFinished]:
        """The two events of `attempt`, made once per attempt value: a tool's first attempt
        is one value at every step (`forge.machine.stages.call_tool.first_attempt`), and
        events are values too (equal events may be one object)."""
        told = self._told.get(attempt.tool)
        if told is None or told[0].attempt is not attempt:
            told = self._told[attempt.tool] = (ToolAttemptStarted(attempt), ToolAttemptFinished(attempt))
        return told

    def before_call(self, kind: str, name: str) -> None:
        """Stop the run before it makes the call of `kind` `name` (tool 'fetch', model
        'gpt-5') if the consumer has left: asked as an attempt starts (there inlined) and as
        a model call starts, and under `arun` again after the consumer's turn just before
        each call (`forge.machine.performers`), where it may have left in between. The words
        are made only when refusing: this is asked before every call of a streamed run."""
        if self.closed:
            self._refuse(f"before a call of {kind} {name!r}")

    def _refuse(self, where: str) -> None:
        raise StreamClosed(f"the stream was closed before the run ended: it stopped {where}")

    def run_finished(self, run: RunView, result: Any) -> None:
        if result.outcome == "needs_input":
            from forge.machine.asking import question_of

            self.put((self.count(), WaitingOn(question_of(run))))  # type: ignore[arg-type]  # it is the run

    def _replayed(self) -> None:
        """The deltas of the model calls the journal answered (one the policy streamed live
        was told already)."""
        journal = self.journal
        for index in range(self.seen, len(journal)):
            entry = journal[index]
            if entry.kind != "model":
                continue
            if self.streamed:
                self.streamed -= 1
                continue
            self.put((self.count(), ModelCallStarted(entry.name)))
            for delta in replayed_deltas(entry.value):
                self.put(delta)
        self.seen = len(journal)


class _ModelRelay(_Relay):
    """`_Relay`, for a run whose policy asks a model: a model call the journal answers (a
    replay) is told as its deltas, looked for as each transition starts."""

    def transition_started(self, run: RunView, state: str) -> None:
        self._replayed()

    def run_finished(self, run: RunView, result: Any) -> None:
        self._replayed()
        super().run_finished(run, result)


class _Handed:
    """The consumer's side: each item `_Relay` put, as the events to yield — the records
    the trace got before it (`TransitionFired`), then its own event. (`stream` does the
    same inline for the items of a step, a method call less per event.)"""

    __slots__ = ("fired", "relay")

    def __init__(self, relay: _Relay) -> None:
        self.relay, self.fired = relay, 0

    def events(self, item: Any) -> Sequence[StreamEvent]:
        if type(item) is tuple:
            (upto, event), trace = item, self.relay.trace
        elif isinstance(item, RunFinished):
            upto, event = len(item.result.trace), item
            trace = item.result.trace
        else:
            return (item,)
        fired = self.fired
        if upto <= fired:
            return (event,)
        self.fired = upto
        at = TransitionFired.at
        if upto == fired + 1:
            return at(trace, fired), event
        events = [at(trace, index) for index in range(fired, upto)]
        events.append(event)
        return events


def _relay_for(loop: Replayable) -> type[_Relay]:
    """The relay a run of `loop` needs: one that looks for replayed model calls only when
    its policy asks a model."""
    return _ModelRelay if loop.spec.config.policy_replays == "model" else _Relay


def stream(loop: Replayable, start: RunStart, journal: Any = None) -> Iterator[StreamEvent]:
    """The events of a run of `loop` started as `start` says (see the module), the last
    `RunFinished`; with `journal`, of its replay (`loop.replay`), calling nothing.

    Raises (while iterating): what `loop.run` or `loop.replay` raises (a `JournalMiss`,
    `AsyncNotSupported`, a blank goal).
    """
    events: queue.SimpleQueue[Any] = queue.SimpleQueue()
    relay = _relay_for(loop)(events.put)
    watched = replace(start, observers=(relay, *start.observers))

    def work() -> None:
        try:
            with listening(relay):
                result = run_through(loop.spec, watched) if journal is None else replay(loop, journal, watched)
            events.put(RunFinished(result))
        except BaseException as error:  # handed to the consumer, raised there
            events.put(_Failed(error))
        finally:
            events.put(_END)

    thread = threading.Thread(target=contextvars.copy_context().run, args=(work,), name="forge-stream", daemon=True)
    thread.start()
    handed = _Handed(relay)
    ended = False
    get, at, fired = events.get, TransitionFired.at, 0
    try:
        while True:
            item = get()
            if type(item) is tuple:
                upto, event = item
                if upto > fired:
                    trace = relay.trace
                    while fired < upto:
                        yield at(trace, fired)
                        fired += 1
                yield event
            elif isinstance(item, StreamEvent) and not isinstance(item, RunFinished):
                yield item
            elif item is _END:
                ended = True
                return
            elif isinstance(item, _Failed):
                raise item.error
            else:
                handed.fired = fired
                yield from handed.events(item)
                fired = handed.fired
    finally:
        if not ended:
            relay.closed = True
            while events.get() is not _END:  # the run stops before its next call
                pass
        thread.join()


async def astream(loop: Replayable, start: RunStart, journal: Any = None) -> AsyncIterator[StreamEvent]:
    """`stream`, as an async generator: the run is `loop.arun(...)` (or, with `journal`, a
    replay in a worker thread), a task of this event loop.

    Raises (while iterating): what `loop.arun` raises.
    """
    events: asyncio.Queue[Any] = asyncio.Queue()
    if journal is None:
        relay = _relay_for(loop)(events.put_nowait)
    else:
        running = asyncio.get_running_loop()

        def from_thread(item: Any) -> None:
            running.call_soon_threadsafe(events.put_nowait, item)

        relay = _relay_for(loop)(from_thread)
    watched = replace(start, observers=(relay, *start.observers))

    async def work() -> None:
        try:
            with listening(relay):
                if journal is None:
                    result = await arun_through(loop.spec, watched)
                else:
                    result = await asyncio.to_thread(replay, loop, journal, watched)
            events.put_nowait(RunFinished(result))
        except BaseException as error:  # handed to the consumer, raised there
            events.put_nowait(_Failed(error))
            if isinstance(error, asyncio.CancelledError):
                raise
        finally:
            events.put_nowait(_END)

    task = asyncio.get_running_loop().create_task(work())
    handed = _Handed(relay)
    ended = False
    try:
        while True:
            item = await events.get()
            if item is _END:
                ended = True
                return
            if isinstance(item, _Failed):
                raise item.error
            for event in handed.events(item):
                yield event
    finally:
        if not ended:
            relay.closed = True
            while await events.get() is not _END:  # the run stops before its next call
                pass
        await task
