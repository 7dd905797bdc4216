"""AG-UI (the Agent-User Interaction protocol, `ag-ui-protocol`): a forge loop as the
backend of an agent front end (CopilotKit and the others that speak it).

`AGUIEvents` turns one run's stream (`AgentLoop.astream`, `forge.events`) into AG-UI events,
in the order the protocol asks: `RUN_STARTED`; each step of the loop — a decision, its
calls, their outcomes, the verdict — as an AG-UI step (`STEP_STARTED` / `STEP_FINISHED`,
`step N`); the model's text as a message
(`TEXT_MESSAGE_START` / `_CONTENT` / `_END`) and its calls as they are written
(`TOOL_CALL_START` / `_ARGS` / `_END`, with the model's own call ids); each call's outcome as
`TOOL_CALL_RESULT`, paired with its call by that id (a child run a tool makes — an agent
tool, a code tool's program — as a subagent, `SUBAGENT_STARTED` / `_FINISHED`, what its
model says marked with its path), its content what the tool returned
after the loop's `redact` (a call no model named — a Python policy's — is announced from
the machine's choice, with an id of its own, `RUN/STEP/TOOL`); and the end: `RUN_FINISHED`
with the typed or text answer, an interrupt outcome when the run waits for a person (its
question, or the call an approval is for), or `RUN_ERROR` with the stop reason.

`ag_ui_app(loop)` is the Starlette app that serves it: POST a `RunAgentInput`, read the
events back as server-sent events (`ag_ui.encoder.EventEncoder`). In memory, a thread goes
on from where its last run left it (the conversation a model keeps, `state=`; the last
`threads` threads, as long as the app lives), and an interrupt for a question is answered by
the next input's `resume` (its payload the reply). Given a durable loop, each input is a run
on forge's queue for a worker, followed from the runs' database as it moves; an interrupt's
id names the run and its question (`RUN~N`), and a `resume` answers it — an approval too —
in any worker, days later; the stream goes on from where the client left it.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from forge.errors import UsageError
from forge.events import (
    ChildRunFinished,
    ChildRunStarted,
    ModelCallStarted,
    RunFinished,
    RunStopped,
    StreamEvent,
    TextDelta,
    ToolAttemptStarted,
    ToolCallDelta,
    ToolProgress,
    TransitionFired,
    WaitingOn,
)
from forge.extras import extra_module
from forge.machine.child import as_json
from forge.machine.start import RunStart
from forge.records.trace import error_text

__all__ = ["AGUIEvents", "ag_ui_app", "goal_of"]


def _core() -> Any:
    """`ag_ui.core`, the protocol's types (extra `ag-ui`)."""
    return extra_module("ag_ui.core", "ag-ui", "forge.protocols.ag_ui", "ag-ui-protocol")


class AGUIEvents:
    """The AG-UI events of one run (`thread_id`, `run_id`) of a loop on `definition`, made
    from its forge events one at a time (`of`), beginning with `started()`."""

    def __init__(self, thread_id: str, run_id: str, definition: Any, forge_run: str | None = None) -> None:
        self.core = _core()
        self.thread_id, self.run_id = thread_id, run_id
        self.forge_run = forge_run or run_id  # the forge run the events are of (a durable run answered goes on)
        self.recording = {state.name for state in definition.states if state.action == "record_observation"}
        self.message: str | None = None  # the text message being written
        self.messages = 0
        self.writing: dict[int, str] = {}  # a call being written: its place in the reply → its id
        self.announced: set[str] = set()  # calls told already (as the model wrote them)
        self.awaiting: list[str] = []  # the calls whose outcome comes next, in order
        self.interrupted = False
        self.step: int | None = None  # the loop's step under way, an AG-UI step
        self.run: Any = None  # the run itself (`observer`): its observations are the results' content
        self.children: list[str] = []  # the child runs under way, innermost last: what the model says is theirs
        self.recorded = 0  # the observations the records read so far told of
        self.at: str | None = None  # the machine's state after the last transition told

    def observer(self) -> Any:
        """The observer to run the loop with (`astream(..., observers=[...])`): it keeps the
        run, whose observations give each result its content as the tool returned it (after
        the loop's `redact`); without it a result's content is the trace's summary."""
        from forge.observe import LoopObserver

        events = self

        class Keeping(LoopObserver):
            def run_started(self, run: Any) -> None:
                events.run = run

        return Keeping()

    def started(self, going_on: bool = False) -> list[Any]:
        """The run's first event (`going_on`: a waiting run answered, already under way)."""
        return [self.core.RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id)]

    def of(self, event: StreamEvent) -> list[Any]:
        """The AG-UI events `event` makes (none for what the protocol has no place for)."""
        made = _MAKERS.get(type(event))
        return made(self, event) if made is not None else []

    def _text(self, event: TextDelta) -> list[Any]:
        made = self._calls_written()
        if self.message is None:
            self.messages += 1
            self.message = f"{self.forge_run}/message.{self.messages}"
            made.append(self.core.TextMessageStartEvent(message_id=self.message, role="assistant", **self._inside()))
        return [*made, self.core.TextMessageContentEvent(message_id=self.message, delta=event.text, **self._inside())]

    def _call_written(self, event: ToolCallDelta) -> list[Any]:
        core, made = self.core, self._text_written()
        if event.index not in self.writing and event.call_id is not None:
            self.writing[event.index] = event.call_id
            self.announced.add(event.call_id)
            made.append(core.ToolCallStartEvent(tool_call_id=event.call_id, tool_call_name=event.name or "",
                                                parent_message_id=None, **self._inside()))
        call_id = self.writing.get(event.index)
        if call_id is not None and event.arguments:
            made.append(core.ToolCallArgsEvent(tool_call_id=call_id, delta=event.arguments, **self._inside()))
        return made

    def _progress(self, event: ToolProgress) -> list[Any]:
        """The protocol has no progress of its own: a custom event, in forge's form."""
        return [self.core.CustomEvent(name="forge.tool_progress", value=event.to_json(), **self._inside())]

    def _child_started(self, event: ChildRunStarted) -> list[Any]:
        self.children.append(event.path)
        return [*self._written(), self.core.SubagentStartedEvent(
            subagent_run_id=event.path, name=event.tool, parent_tool_call_id=self.awaiting[0] if self.awaiting else None)]

    def _child_finished(self, event: ChildRunFinished) -> list[Any]:
        core = self.core
        if event.path in self.children:
            self.children.remove(event.path)
        if event.outcome == "success":
            return [*self._written(), core.SubagentFinishedEvent(
                subagent_run_id=event.path, outcome=core.SubagentFinishedSuccessOutcome(type="success"))]
        return [*self._written(), core.SubagentErrorEvent(subagent_run_id=event.path, code=event.reason,
                                                          message=f"the child run ended in {event.reason}")]

    def _waiting(self, event: WaitingOn) -> list[Any]:
        core = self.core
        self.interrupted = True
        return [*self._written(), *self._step_ended(), core.RunFinishedEvent(
            thread_id=self.thread_id, run_id=self.run_id,
            outcome=core.RunFinishedInterruptOutcome(type="interrupt", interrupts=[self._interrupt(event.waiting)]))]

    def _inside(self) -> dict[str, str]:
        """The child run what the model says belongs to, as AG-UI names it (none: the run's own)."""
        return {"subagent_run_id": self.children[-1]} if self.children else {}

    def _step_ended(self) -> list[Any]:
        """A loop step's end: the run's state as it stands (a snapshot), then the step's end."""
        if self.step is None:
            return []
        ended, self.step = self.step, None
        snapshot = {"run_id": self.forge_run, "state": self.at, "step": ended, "observations": self.recorded}
        return [self.core.StateSnapshotEvent(snapshot=snapshot), self.core.StepFinishedEvent(step_name=f"step {ended}")]

    def _text_written(self) -> list[Any]:
        if self.message is None:
            return []
        ended, self.message = self.message, None
        return [self.core.TextMessageEndEvent(message_id=ended, **self._inside())]

    def _calls_written(self) -> list[Any]:
        ended = [self.core.ToolCallEndEvent(tool_call_id=call_id, **self._inside()) for call_id in self.writing.values()]
        self.writing = {}
        return ended

    def _written(self) -> list[Any]:
        """The end of what the model was writing (its text, its calls): its reply is whole."""
        return [*self._text_written(), *self._calls_written()]

    def _fired(self, record: Any) -> list[Any]:
        detail = record.detail
        made: list[Any] = []
        if record.step != self.step:  # a step of the loop: select, call, record, verify
            made.extend([*self._step_ended(), self.core.StepStartedEvent(step_name=f"step {record.step}")])
            self.step = record.step
        self.at = record.dest
        if record.trigger == "choose" and ("tool" in detail or "tools" in detail):
            made.extend(self._chosen(record))
        elif record.source in self.recording:
            count = len(detail["statuses"]) if isinstance(detail.get("statuses"), list) else 1
            made.extend(self._results(detail, count))
        return made

    def _chosen(self, record: Any) -> list[Any]:
        """The calls the machine chose: each told, unless the model's writing told it."""
        core, detail = self.core, record.detail
        tools = detail.get("tools") or [detail.get("tool")]
        ids = detail.get("call_ids") or [detail.get("call_id")] * len(tools)
        arguments = _split(detail.get("arguments"), len(tools))
        made: list[Any] = []
        self.awaiting = []
        for number, (tool, call_id, given) in enumerate(zip(tools, ids, arguments, strict=True)):
            call_id = call_id or f"{self.forge_run}/{record.step}/{tool}" + (f"/{number + 1}" if len(tools) > 1 else "")
            self.awaiting.append(call_id)
            if call_id in self.announced:
                continue
            self.announced.add(call_id)
            made.extend([core.ToolCallStartEvent(tool_call_id=call_id, tool_call_name=str(tool)),
                         core.ToolCallArgsEvent(tool_call_id=call_id, delta=given),
                         core.ToolCallEndEvent(tool_call_id=call_id)])
        return made

    def _results(self, detail: Mapping[str, Any], count: int) -> list[Any]:
        """Each awaited call's outcome: the `count` observations the record made, as the tool
        returned them (after the loop's `redact`), or the trace's summary of them."""
        ids, self.awaiting = self.awaiting, []
        first, self.recorded = self.recorded, self.recorded + count
        if not ids:
            return []
        observations = getattr(getattr(self.run, "loop_state", None), "observations", ())[first:first + count]
        if len(observations) == len(ids):
            contents = [self._content(observation) for observation in observations]
        else:
            contents = _split(detail.get("payload"), len(ids))
        return [self.core.ToolCallResultEvent(message_id=f"{call_id}/result", tool_call_id=call_id, content=content,
                                              role="tool") for call_id, content in zip(ids, contents, strict=True)]

    def _content(self, observation: Any) -> str:
        payload = observation.payload
        redact = getattr(getattr(self.run, "config", None), "redact", None)
        if redact is not None:
            payload = redact(observation.tool_name, "payload", payload)
        if observation.status != "ok":
            return f"error: {payload}"
        return payload if isinstance(payload, str) else json.dumps(as_json(payload), default=str)

    def _interrupt(self, waiting: Any) -> Any:
        """What the run waits for, as an AG-UI interrupt: its id (the call's fingerprint for
        an approval), its state as the reason, its question in words, the call it is about,
        and the answers it takes."""
        shown = waiting.shown()
        kinds = sorted({each["kind"] for each in shown.get("answers", ())})
        answer: dict[str, Any] = {"enum": kinds} if kinds else {"type": "string"}
        return self.core.Interrupt(id=f"{self.forge_run}~{waiting.asked or 1}",
                                   reason=waiting.state, message=str(shown.get("question") or ""),
                                   tool_call_id=self.awaiting[0] if waiting.tool and self.awaiting else None,
                                   response_schema={"type": "object", "properties": {"answer": answer},
                                                    "required": ["answer"]})

    def _finished(self, result: Any) -> list[Any]:
        core = self.core
        if self.interrupted:
            return []
        usage = [core.TokenUsage(model=call.model or call.request_model, provider=call.provider,
                                 input_tokens=call.prompt_tokens, output_tokens=call.completion_tokens,
                                 cached_input_tokens=call.cached_tokens or None) for call in result.usage.calls]
        if result.outcome == "success":
            return [core.RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, result=as_json(result.answer),
                                          outcome=core.RunFinishedSuccessOutcome(type="success"), usage=usage or None)]
        why = error_text(result.error) if result.error is not None else ""
        return [core.RunErrorEvent(message=f"the run ended in {result.reason}" + (f": {why}" if why else ""),
                                   code=str(result.reason), usage=usage or None)]


    def _stopped(self, stored: Any) -> list[Any]:
        """The end of a durable run followed from its database (a `DurableResult`)."""
        core = self.core
        if self.interrupted or stored.status == "waiting":
            return []
        if stored.status == "cancelled":
            return [core.RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id,
                                          outcome=core.RunFinishedCancelledOutcome(type="cancelled"))]
        if stored.outcome == "success":
            return [core.RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, result=as_json(stored.answer),
                                          outcome=core.RunFinishedSuccessOutcome(type="success"))]
        why = f": {stored.error}" if stored.error else ""
        return [core.RunErrorEvent(message=f"the run ended in {stored.reason or stored.status}{why}",
                                   code=str(stored.reason or stored.status))]


_MAKERS: dict[type, Any] = {
    TextDelta: AGUIEvents._text,
    ToolCallDelta: AGUIEvents._call_written,
    ModelCallStarted: lambda events, event: events._written(),
    ToolAttemptStarted: lambda events, event: events._written(),
    ToolProgress: AGUIEvents._progress,
    TransitionFired: lambda events, event: [*events._written(), *events._fired(event.record)],
    ChildRunStarted: AGUIEvents._child_started,
    ChildRunFinished: AGUIEvents._child_finished,
    WaitingOn: AGUIEvents._waiting,
    RunFinished: lambda events, event: [*events._written(), *events._step_ended(), *events._finished(event.result)],
    RunStopped: lambda events, event: [*events._written(), *events._step_ended(), *events._stopped(event.result)],
}
"""What each kind of forge event makes of AG-UI's, by its type (`AGUIEvents.of`)."""


def _split(text: Any, count: int) -> list[str]:
    """A record's arguments or payload (JSON text; a list of each call's for calls made
    together) as `count` texts, one per call."""
    text = "" if text is None else str(text)
    if count == 1:
        return [text]
    try:
        each = json.loads(text)
    except ValueError:
        return [text] * count
    if isinstance(each, list) and len(each) == count:
        return [item if isinstance(item, str) else json.dumps(item) for item in each]
    return [text] * count


def goal_of(messages: Iterable[Any]) -> str:
    """The goal of a run from an AG-UI input's messages: the last user message's text.

    Raises:
        UsageError: no user message has text.
    """
    for message in reversed(list(messages)):
        if getattr(message, "role", None) == "user":
            content = getattr(message, "content", None)
            if isinstance(content, str) and content.strip():
                return content
            texts = [getattr(part, "text", None) for part in content or ()]
            joined = "".join(text for text in texts if isinstance(text, str))
            if joined.strip():
                return joined
    raise UsageError("an AG-UI run needs a user message with text: its goal")


def ag_ui_app(loop: Any, threads: int = 1000) -> Any:
    """A Starlette app serving `loop` over AG-UI at POST `/` (see the module); the last
    `threads` threads' states are kept to go on from.

    Raises:
        ImportError: the `ag-ui` extra (or Starlette) is not installed.
    """
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    core = _core()
    from ag_ui.encoder import EventEncoder

    durable = callable(getattr(loop, "submit", None)) and hasattr(loop, "runs")  # a loop.durable(...)

    kept = _Threads(threads)

    async def run(request: Request) -> Response:
        try:
            given = core.RunAgentInput.model_validate(await request.json())
        except ValueError as error:
            return JSONResponse({"error": f"not an AG-UI run input: {error}"}, status_code=422)
        encoder = EventEncoder(accept=request.headers.get("accept", "text/event-stream"))
        if durable:
            try:
                followed = await run_in_threadpool(_durable_start, loop, given)
            except (UsageError, LookupError) as error:
                return JSONResponse({"error": str(error)}, status_code=422)
            return StreamingResponse(_durable_streamed(loop, given, followed, encoder),
                                     media_type=encoder.get_content_type())
        state, waiting = kept.get(given.thread_id)
        try:
            reply = _resumed(given, waiting)
            goal = reply if reply is not None else goal_of(given.messages)
        except UsageError as error:
            return JSONResponse({"error": str(error)}, status_code=422)
        return StreamingResponse(_streamed(loop, given, RunStart(goal, state=state, run_id=given.run_id), kept, encoder),
                                 media_type=encoder.get_content_type())

    return Starlette(routes=[Route("/", run, methods=["POST"])])


def _resumed(given: Any, waiting: Any) -> str | None:
    """The reply an input's `resume` gives to the question the thread's last run asked
    (`waiting`, a `forge.Waiting`): its payload's text, or its `answer`; None without a
    resume.

    Raises:
        UsageError: the resume answers nothing this thread waits for, or an approval (which
            only a durable run goes on from: in memory the run that waits is over).
    """
    entries = [entry for entry in given.resume or () if entry.status == "resolved"]
    if not entries:
        return None
    if waiting is None:
        raise UsageError(f"thread {given.thread_id!r} waits for nothing: its resume answers no interrupt")
    if waiting.state != "input_required":
        raise UsageError(f"thread {given.thread_id!r} waits in {waiting.state}: in memory a run waiting for an "
                         "approval is over; serve a durable loop to answer it")
    payload = entries[0].payload
    if isinstance(payload, Mapping):
        payload = payload.get("answer", payload.get("text"))
    if not isinstance(payload, str) or not payload.strip():
        raise UsageError("a resume's payload is the reply: text, or {\"answer\": text}")
    return payload


class _Threads:
    """The last `limit` threads an app served in memory: each one's last state, and what
    it waits for, to go on from when the client posts to it again."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._kept: OrderedDict[str, tuple[Any, Any]] = OrderedDict()

    def get(self, thread_id: str) -> tuple[Any, Any]:
        """The thread's last state and what it waits for; (None, None) for a new thread."""
        return self._kept.get(thread_id, (None, None))

    def keep(self, thread_id: str, state: Any, waiting: Any) -> None:
        """Keep the thread's state as its run left it, forgetting the oldest thread past `limit`."""
        self._kept[thread_id] = (state, waiting)
        self._kept.move_to_end(thread_id)
        while len(self._kept) > self.limit:
            self._kept.popitem(last=False)


async def _streamed(loop: Any, given: Any, start: RunStart, kept: _Threads, encoder: Any) -> AsyncIterator[str]:
    """The run `start` says of `loop` as AG-UI events for the input `given`; its thread's
    state kept in `kept` when it ends."""
    translated = AGUIEvents(given.thread_id, given.run_id, loop.definition)
    for made in translated.started():
        yield encoder.encode(made)
    waiting = None
    async for event in loop.astream(replace(start, observers=(*start.observers, translated.observer()))):
        if isinstance(event, WaitingOn):
            waiting = event.waiting
        if isinstance(event, RunFinished):
            kept.keep(given.thread_id, event.result.state, waiting)
        for made in translated.of(event):
            yield encoder.encode(made)


@dataclass(frozen=True, slots=True)
class _Followed:
    """A durable run an input follows: the forge run, how many of its transitions the client
    has had already (`skip`), and the question the input answered (`answered`, 0: none)."""

    forge_run: str
    skip: int = 0
    answered: int = 0


def _durable_start(durable: Any, given: Any) -> _Followed:
    """Start the durable run an input asks for, or answer the one its `resume` names: the
    run to follow from there (`_Followed`).

    Raises:
        UsageError: the resume names no interrupt of a run, answers a question the run no
            longer waits on, or gives no answer that fits (`AnswerRefused`).
        LookupError: (`RunNotFound`) no such run.
    """
    entries = [entry for entry in given.resume or () if entry.status == "resolved"]
    if not entries:
        durable.submit(goal_of(given.messages), run_id=given.run_id)
        return _Followed(given.run_id)
    forge_run, _, asked = entries[0].interrupt_id.rpartition("~")
    if not forge_run:
        raise UsageError(f"interrupt {entries[0].interrupt_id!r} is not one this app made (RUN~QUESTION)")
    stored = durable.runs.get(forge_run)
    waiting = stored.waiting
    if waiting is None or str(waiting.asked) != asked:
        raise UsageError(f"run {forge_run!r} does not wait on question {asked}: it is {stored.status}")
    durable.runs.resume(forge_run, _answer(entries[0].payload, waiting))  # (answered: not waited for)
    return _Followed(forge_run, len(stored.records), waiting.asked)


def _answer(payload: Any, waiting: Any) -> Any:
    """A resume's payload as the answer to `waiting`, read by forge's one reader of answers
    (`forge.records.answers.read_answer`): `{"kind", "value"}` (one of `waiting.choices()`,
    what the interrupt's schema lists), "approve" or "reject" (the waiting call's), or the
    reply's text.

    Raises:
        UsageError: a payload that is none of these (`AnswerRefused`, one, for a kind or a
            value that does not fit).
    """
    from forge.records.answers import read_answer

    if isinstance(payload, Mapping) and "kind" in payload:
        return read_answer(payload["kind"], payload.get("value"), payload.get("arguments"))
    if isinstance(payload, Mapping):
        payload = payload.get("answer")
    if payload in ("approve", "reject") and waiting.fingerprint:
        return read_answer(payload, waiting.fingerprint)
    if isinstance(payload, str) and payload.strip():
        return read_answer("text", payload)
    raise UsageError(f"a resume's payload is an answer: {{\"kind\", \"value\"}}, \"approve\", \"reject\" or a reply; "
                     f"got {payload!r:.100}")


async def _durable_streamed(durable: Any, given: Any, followed: _Followed, encoder: Any) -> AsyncIterator[str]:
    """The durable run `followed.forge_run` as AG-UI events, read from its database as it
    moves in whichever worker runs it (`StoredRuns.stream`), after its first `skip`
    transitions (what the client had when it answered question `answered`; until the run
    takes the answer it still reads as waiting on it, and is read again)."""
    forge_run, skip, answered = followed.forge_run, followed.skip, followed.answered
    import asyncio

    from starlette.concurrency import iterate_in_threadpool

    translated = AGUIEvents(given.thread_id, given.run_id, durable.loop.definition, forge_run=forge_run)
    for made in translated.started(going_on=skip > 0):
        yield encoder.encode(made)
    shown = skip
    while True:
        caught_up, stale = shown == 0, False
        async for event in iterate_in_threadpool(durable.runs.stream(forge_run)):
            if isinstance(event, TransitionFired):
                if event.record.sequence <= shown:
                    caught_up = event.record.sequence == shown  # what follows it is new
                    continue
                caught_up, shown = True, event.record.sequence
            elif not caught_up:
                continue
            elif _answered_already(event, answered):
                stale = True
                break
            for made in translated.of(event):
                yield encoder.encode(made)
        if not stale:
            return
        await asyncio.sleep(0.05)


def _answered_already(event: StreamEvent, answered: int) -> bool:
    """Whether `event` says the run waits on a question answered already (`answered`): it
    has not taken the answer yet."""
    if isinstance(event, WaitingOn):
        return bool(event.waiting.asked <= answered)
    if isinstance(event, RunStopped) and event.result.status == "waiting":
        waiting = event.result.waiting
        return waiting is None or waiting.asked <= answered
    return False
