"""What a streamed run tells its consumer (`AgentLoop.stream`, `AgentLoop.astream`): typed,
frozen events, in the order they happen.

    for event in loop.stream("copy todo.md to done.md"):
        match event:
            case TextDelta(text=text):
                print(text, end="", flush=True)
            case TransitionFired(record=record):
                ...
            case RunFinished(result=result):
                print(result.reason)

- `RunStarted`: the run's id and goal, first;
- `TransitionFired`: a transition's record, once it is in the trace;
- `ToolAttemptStarted` / `ToolAttemptFinished`: each call of a tool's handler;
- `ToolProgress`: a tool under way said how far it got (an MCP server's progress);
- `ModelCallStarted`, then `TextDelta` and `ToolCallDelta` as the model produces its reply
  (`ChatPolicy` streams through the openai client while someone listens; a replayed model
  call's reply comes back from the journal as one delta per text and per call);
- `ChildRunStarted` / `ChildRunFinished`: a tool ran a loop of its own (its path, its end);
  what the child's model says streams between the two;
- `WaitingOn`: the run ended waiting for a person (a question, an approval, a tool's name);
- `RunFinished`: the run's `LoopResult`, always the last event.

Every event has one wire form, `event.to_json()`: a JSON object whose `type` names it
(`TYPE`: started, transition, tool_attempt_started, tool_attempt, tool_progress, model_call, text,
tool_call, child_started, child_finished, waiting, finished, stopped) — what `forge ui`'s
API streams, and what any other edge sends;
a new event type says its form here, once.

A model policy streams only while a consumer listens (`listening`): the `sink` set for
the run's thread or task receives the deltas; every other run pays nothing for it.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from forge.errors import ForgeError

if TYPE_CHECKING:
    from forge.observe import ToolAttempt
    from forge.records.answers import Waiting
    from forge.records.trace import TransitionRecord
    from forge.result import LoopResult

__all__ = ["ChildRunFinished", "ChildRunStarted", "ModelCallStarted", "RunFinished", "RunStarted", "RunStopped",
           "StreamClosed", "StreamEvent", "TextDelta", "ToolAttemptFinished", "ToolAttemptStarted", "ToolCallDelta",
           "ToolProgress", "TransitionFired", "WaitingOn", "listening", "replayed_deltas", "sink"]


class StreamEvent:
    """What every event of a streamed run is: its `TYPE`, and its wire form (`to_json`)."""

    __slots__ = ()
    TYPE = "event"

    def to_json(self) -> dict[str, Any]:
        """This event as one JSON object: `{"type": TYPE, ...its fields}`."""
        return {"type": self.TYPE, **self._fields()}

    def _fields(self) -> dict[str, Any]:
        return {}


class StreamClosed(ForgeError, RuntimeError):
    """The consumer stopped reading a streamed run before it ended (it broke out of the
    loop, or closed the stream): the run ends in `fatal_error`, with this as its error,
    before its next call to the world (a tool, a model), once the call under way has
    finished."""


_new = object.__new__  # a stream makes one event per transition: made without `__init__`


class TransitionFired(StreamEvent):
    """A transition fired: its `record`, as the trace keeps it (made when first read: a
    consumer that only counts transitions costs the run no record).

    `TransitionFired(record)`, or `TransitionFired.at(trace, index)` for the trace's record
    `index`.
    """

    __slots__ = ("_index", "_record", "_trace")
    TYPE = "transition"

    def __init__(self, record: TransitionRecord) -> None:
        self._record: TransitionRecord | None = record
        self._trace: Sequence[TransitionRecord] = ()
        self._index = 0

    @classmethod
    def at(cls, trace: Sequence[TransitionRecord], index: int) -> TransitionFired:
        event = _new(cls)
        event._record = None
        event._trace = trace
        event._index = index
        return event

    @property
    def record(self) -> TransitionRecord:
        if self._record is None:
            self._record = self._trace[self._index]
        return self._record

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TransitionFired) and self.record == other.record

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TransitionFired({self.record!r})"

    def _fields(self) -> dict[str, Any]:
        return {"record": self.record.to_json()}


@dataclass(frozen=True, slots=True)
class ToolAttemptStarted(StreamEvent):
    """A tool's handler is about to be called (`attempt.number` counts from 1)."""

    attempt: ToolAttempt
    TYPE = "tool_attempt_started"

    def _fields(self) -> dict[str, Any]:
        return _attempt_json(self.attempt)


@dataclass(frozen=True, slots=True)
class ToolAttemptFinished(StreamEvent):
    """A tool's handler returned, or raised (`attempt.error`)."""

    attempt: ToolAttempt
    TYPE = "tool_attempt"

    def _fields(self) -> dict[str, Any]:
        error = self.attempt.error
        return {**_attempt_json(self.attempt), "error": None if error is None else _error_text(error)}


@dataclass(frozen=True, slots=True)
class ToolProgress(StreamEvent):
    """A tool under way said how far it got: an MCP server's progress notification
    (`forge.mcp`), as the server sent it (`progress` so far, of `total` when it knows it,
    and its `message`)."""

    tool: str
    progress: float
    total: float | None = None
    message: str | None = None
    TYPE = "tool_progress"

    def _fields(self) -> dict[str, Any]:
        return {"tool": self.tool, "progress": self.progress, "total": self.total, "message": self.message}


@dataclass(frozen=True, slots=True)
class RunStarted(StreamEvent):
    """The run began: its id and its goal. The first event of a run's own stream."""

    run_id: str
    goal: str
    TYPE = "started"

    def _fields(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "goal": self.goal}


@dataclass(frozen=True, slots=True)
class ChildRunStarted(StreamEvent):
    """A tool of the run began a child run (`AgentLoop.as_tool`, a `CodeTool`'s program):
    its `path` (`RUN/TOOL.N`) and the tool. What its model says streams after it, until
    `ChildRunFinished`."""

    path: str
    tool: str
    TYPE = "child_started"

    def _fields(self) -> dict[str, Any]:
        return {"path": self.path, "tool": self.tool}


@dataclass(frozen=True, slots=True)
class ChildRunFinished(StreamEvent):
    """The child run `path` ended: its stop reason and outcome."""

    path: str
    reason: str
    outcome: str | None
    TYPE = "child_finished"

    def _fields(self) -> dict[str, Any]:
        return {"path": self.path, "reason": self.reason, "outcome": self.outcome}


@dataclass(frozen=True, slots=True)
class ModelCallStarted(StreamEvent):
    """A request went to the model `model`; its reply streams as deltas."""

    model: str
    TYPE = "model_call"

    def _fields(self) -> dict[str, Any]:
        return {"model": self.model}


@dataclass(frozen=True, slots=True)
class TextDelta(StreamEvent):
    """The next piece of the text the model is writing."""

    text: str
    TYPE = "text"

    def _fields(self) -> dict[str, Any]:
        return {"text": self.text}


@dataclass(frozen=True, slots=True)
class ToolCallDelta(StreamEvent):
    """The next piece of a tool call the model is writing: the call's position in its reply
    (`index`), its id and tool name (given on its first piece), and more of its arguments'
    JSON text."""

    index: int
    call_id: str | None
    name: str | None
    arguments: str
    TYPE = "tool_call"

    def _fields(self) -> dict[str, Any]:
        return {"index": self.index, "call_id": self.call_id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True, slots=True)
class WaitingOn(StreamEvent):
    """The run ended in a needs-input state: what it waits for (`waiting.state`, and the
    call, tools or question of it: `waiting.question` says it in one line)."""

    waiting: Waiting
    TYPE = "waiting"

    def _fields(self) -> dict[str, Any]:
        return {"waiting": self.waiting.shown()}


@dataclass(frozen=True, slots=True)
class RunFinished(StreamEvent):
    """The run ended: its result. Always the last event."""

    result: LoopResult
    TYPE = "finished"

    def _fields(self) -> dict[str, Any]:
        result = self.result
        return {"reason": result.reason, "outcome": result.outcome, "steps": result.steps,
                "error": None if result.error is None else _error_text(result.error)}


@dataclass(frozen=True, slots=True)
class RunStopped(StreamEvent):
    """A stored run followed from its database (`StoredRuns.stream`) stopped moving: it
    finished, waits for an answer, was cancelled or failed. `result` is the run as stored
    (a `forge.durable.DurableResult`: its `status`, `reason`, `waiting`, `summary`). Always
    the last event of such a stream."""

    result: Any
    TYPE = "stopped"

    def _fields(self) -> dict[str, Any]:
        stored = self.result
        return {"status": stored.status, "reason": stored.reason, "summary": stored.summary}


def _error_text(error: BaseException) -> str:
    from forge.records.trace import error_text

    return error_text(error)


def _attempt_json(attempt: ToolAttempt) -> dict[str, Any]:
    return {"tool": attempt.tool, "number": attempt.number, "delay_before": attempt.delay_before,
            "call_id": attempt.call_id}


Sink = Callable[[StreamEvent], None]

_SINK: contextvars.ContextVar[Sink | None] = contextvars.ContextVar("forge_stream_sink", default=None)


def sink() -> Sink | None:
    """Where the deltas of a model call made now go: the consumer of the streamed run this
    thread or task runs, or None when nobody listens (then a policy does not stream)."""
    return _SINK.get()


@contextmanager
def listening(to: Sink) -> Iterator[None]:
    """Send the deltas of the model calls made inside the `with` block to `to`."""
    token = _SINK.set(to)
    try:
        yield
    finally:
        _SINK.reset(token)


def replayed_deltas(reply: Any) -> list[StreamEvent]:
    """The deltas of a model reply the journal answered (no model was asked): its text as
    one delta and each tool call as one, without timing."""
    message = reply.get("message") if isinstance(reply, dict) else None
    if not isinstance(message, dict):
        return []
    deltas: list[StreamEvent] = []
    if message.get("content"):
        deltas.append(TextDelta(str(message["content"])))
    for index, call in enumerate(message.get("tool_calls") or ()):
        function = call.get("function") or {}
        deltas.append(ToolCallDelta(index, call.get("id"), function.get("name"), str(function.get("arguments") or "")))
    return deltas
