"""A run as a stream of typed events (issue 33, item 1): `loop.stream` and `loop.astream`
yield each transition, tool attempt, model call and the deltas of a `ChatPolicy`'s reply as
they happen, then the result; the run is the run `run` makes; breaking out stops it in
fatal_error; a replayed run streams its model replies from the journal."""

import asyncio
import contextlib
import contextvars
import queue
import threading

import pytest
from builders import Recorder
from chat_server import ChatServer, reply
from models import chat_policy

from forge import AgentLoop, Ask, Finish, Intent, LoopObserver, ScriptedPolicy, Tool, TransientToolError, tool
from forge.events import (
    ModelCallStarted,
    RunFinished,
    StreamClosed,
    TextDelta,
    ToolAttemptFinished,
    ToolAttemptStarted,
    ToolCallDelta,
    TransitionFired,
    WaitingOn,
)

NOTES = {"todo.md": "buy milk"}


@tool
def read_note(path: str) -> str:
    """Read a note by its path."""
    return NOTES[path]


def _chat_loop(server):
    policy = chat_policy(server, system="You keep notes.")
    return AgentLoop([read_note], policy, lambda o: isinstance(o.payload, Finish))


def _script():
    return [reply(None, ("call_1", "read_note", {"path": "todo.md"})), reply("It says: buy milk")]


def _copy_loop(calls=None):
    calls = calls if calls is not None else []

    def fetch(path: str) -> str:
        calls.append(path)
        if len(calls) == 1:
            raise TransientToolError("busy")
        return "text"

    steps = [Intent.call("fetch", path="a.md"), Intent.call("fetch", path="b.md"), Finish("done")]
    return AgentLoop([Tool("fetch", {"fetch"}, fetch, required={"path"})], ScriptedPolicy(steps),
                     lambda o: o.tool_name == "finish")


def _shape(trace):
    return [(r.source, r.trigger, r.dest, r.verdict) for r in trace]


def test_a_streamed_run_yields_every_transition_and_tool_attempt_then_its_result():
    events = list(_copy_loop().stream("copy"))
    finished = events[-1]
    assert isinstance(finished, RunFinished) and finished.result.reason == "verified_success"
    fired = [e.record for e in events if isinstance(e, TransitionFired)]
    assert fired == list(finished.result.trace)
    attempts = [(type(e).__name__, e.attempt.number, e.attempt.error is not None) for e in events
                if isinstance(e, ToolAttemptStarted | ToolAttemptFinished)]
    assert attempts == [("ToolAttemptStarted", 1, False), ("ToolAttemptFinished", 1, True),
                        ("ToolAttemptStarted", 2, False), ("ToolAttemptFinished", 2, False),
                        ("ToolAttemptStarted", 1, False), ("ToolAttemptFinished", 1, False)]


class _InOrder(LoopObserver):
    """What an observer is told of transitions and tool attempts, in order."""

    def __init__(self):
        self.told = []

    def transition_finished(self, run, record):
        self.told.append(("transition", record.sequence))

    def tool_attempt_started(self, run, attempt):
        self.told.append(("started", attempt))

    def tool_attempt(self, run, attempt):
        self.told.append(("finished", attempt))


def _in_order(events):
    kinds = {TransitionFired: "transition", ToolAttemptStarted: "started", ToolAttemptFinished: "finished"}
    return [(kinds[type(e)], e.record.sequence if isinstance(e, TransitionFired) else e.attempt)
            for e in events if type(e) in kinds]


def test_a_stream_places_each_tool_attempt_among_the_transitions_where_an_observer_is_told_it():
    """Retries included: a failed attempt's end, the retry's start and end, then the next
    step's attempt, each between the transitions an observer sees around it."""
    told = _InOrder()
    events = list(_copy_loop().stream("copy", observers=[told]))
    assert _in_order(events) == told.told
    assert [kind for kind, _ in told.told].count("started") == 3


def test_astream_places_each_tool_attempt_among_the_transitions_where_an_observer_is_told_it():
    told = _InOrder()

    async def streamed():
        return [event async for event in _copy_loop().astream("copy", observers=[told])]

    assert _in_order(asyncio.run(streamed())) == told.told


def test_a_stream_may_be_iterated_from_one_thread_after_another():
    """As a web server's thread pool does (Starlette iterates a plain generator there, each
    `next()` in whichever worker is free)."""
    stream, events, threads, failures = _copy_loop().stream("copy"), [], [], []
    turns = [queue.SimpleQueue(), queue.SimpleQueue()]
    taken = queue.SimpleQueue()

    def worker(turn):
        while turn.get():
            threads.append(threading.get_ident())
            try:
                events.append(next(stream, None))
            except Exception as failure:  # told to the test below
                failures.append(failure)
                events.append(None)
            taken.put(True)

    workers = [threading.Thread(target=worker, args=(turn,)) for turn in turns]
    for each in workers:
        each.start()
    while not events or events[-1] is not None:
        turns[len(events) % 2].put(True)
        taken.get(timeout=30)
    for turn, each in zip(turns, workers, strict=True):
        turn.put(False)
        each.join()
    assert failures == [] and threads[0] != threads[1] and isinstance(events[-2], RunFinished)
    assert events[-2].result.reason == "verified_success"
    assert [e.record for e in events if isinstance(e, TransitionFired)] == list(events[-2].result.trace)


REQUEST = contextvars.ContextVar("request", default="none")


def test_a_streamed_runs_tools_see_the_context_variables_of_the_code_iterating_it():
    """As under `run`: a tracer's current span or a request's id set around the loop reach
    the run's tools (and the run's own settings do not leak back out)."""
    def whose(path: str) -> str:
        seen = REQUEST.get()
        REQUEST.set("changed by the tool")
        return seen

    loop = AgentLoop([Tool("whose", {"whose"}, whose, required={"path"})],
                     ScriptedPolicy([Intent.call("whose", path="a.md"), Finish("done")]),
                     lambda o: o.tool_name == "finish")
    token = REQUEST.set("request-7")
    try:
        result = list(loop.stream("whose"))[-1].result
        assert result.state.observations[0].payload == "request-7" and REQUEST.get() == "request-7"
    finally:
        REQUEST.reset(token)


def test_a_streamed_run_is_the_run_that_run_makes():
    streamed = list(_copy_loop().stream("copy", run_id="same"))[-1].result
    ran = _copy_loop().run("copy", run_id="same")
    assert _shape(streamed.trace) == _shape(ran.trace)
    assert [(e.kind, e.name, e.identity, e.value) for e in streamed.journal] == \
        [(e.kind, e.name, e.identity, e.value) for e in ran.journal]


def test_a_chat_policys_reply_streams_as_text_and_tool_call_deltas():
    with ChatServer(_script()) as server:
        events = list(_chat_loop(server).stream("what does todo.md say?"))
    assert [e.model for e in events if isinstance(e, ModelCallStarted)] == ["test-model", "test-model"]
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(texts) > 1 and "".join(texts) == "It says: buy milk"
    calls = [e for e in events if isinstance(e, ToolCallDelta)]
    assert (calls[0].call_id, calls[0].name) == ("call_1", "read_note")
    assert "".join(c.arguments for c in calls) == '{"path": "todo.md"}'
    assert all(request["stream"] is True for request in server.requests)
    assert events[-1].result.answer == "It says: buy milk"


def test_a_streamed_chat_run_journals_what_an_unstreamed_one_does():
    with ChatServer(_script()) as server:
        streamed = list(_chat_loop(server).stream("what does todo.md say?"))[-1].result
    with ChatServer(_script()) as server:
        ran = _chat_loop(server).run("what does todo.md say?")
    models = [(e.identity, e.value["message"]) for e in streamed.journal if e.kind == "model"]
    assert models == [(e.identity, e.value["message"]) for e in ran.journal if e.kind == "model"]
    assert all("stream" not in identity for identity, _ in models)
    assert _shape(streamed.trace) == _shape(ran.trace)
    assert streamed.usage.total_tokens == ran.usage.total_tokens == 4
    timeless = ("started", "seconds")  # when a call was made and how long it took: the only fields that may differ

    def replies(result):
        return [(e.identity, e.value["message"], {k: v for k, v in e.value["usage"].items() if k not in timeless})
                for e in result.journal if e.kind == "model"]

    assert replies(streamed) == replies(ran)  # the whole reply as journaled: finish reason, model, provider too
    assert [usage["finish_reason"] for _, _, usage in replies(streamed)] == ["tool_calls", "stop"]


def test_a_replayed_chat_run_streams_its_model_replies_from_the_journal_calling_nothing():
    with ChatServer(_script()) as server:
        recorded = _chat_loop(server).run("what does todo.md say?")
    with ChatServer([]) as nobody:  # a model asked now fails the test
        events = list(_chat_loop(nobody).stream("what does todo.md say?", journal=recorded.journal))
    assert nobody.requests == [] and events[-1].result.reason == "verified_success"
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["It says: buy milk"]
    assert [(e.call_id, e.name, e.arguments) for e in events if isinstance(e, ToolCallDelta)] == \
        [("call_1", "read_note", '{"path": "todo.md"}')]


class _Ended(LoopObserver):
    def __init__(self):
        self.result = None

    def run_finished(self, run, result):
        self.result = result


def _held_loop(calls, gate):
    """Two calls of a tool whose first waits for `gate`: a consumer sees it start, then stops."""
    def fetch(path: str) -> str:
        calls.append(path)
        gate.wait(timeout=30)
        return "text"

    steps = [Intent.call("fetch", path="a.md"), Intent.call("fetch", path="b.md"), Finish("done")]
    return AgentLoop([Tool("fetch", {"fetch"}, fetch, required={"path"})], ScriptedPolicy(steps),
                     lambda o: o.tool_name == "finish")


def test_breaking_out_of_the_stream_ends_the_run_in_fatal_error_at_its_next_transition():
    calls, ended, gate = [], _Ended(), threading.Event()
    stream = _held_loop(calls, gate).stream("copy", observers=[ended])
    for event in stream:
        if isinstance(event, ToolAttemptStarted):
            break
    threading.Timer(0.1, gate.set).start()  # the call under way finishes after the consumer has left
    stream.close()
    assert ended.result.reason == "fatal_error" and isinstance(ended.result.error, StreamClosed)
    assert calls == ["a.md"]  # the call under way finished; nothing after it ran
    assert "the stream was closed" in ended.result.summary
    assert str(ended.result.error) == "the stream was closed before the run ended: it stopped before a call of " \
                                      "tool 'fetch'"


def test_a_run_that_waits_says_on_what_before_it_ends():
    loop = AgentLoop([read_note], ScriptedPolicy([Ask("Which note?")]), lambda o: True)
    events = list(loop.stream("read"))
    waiting = [e.waiting for e in events if isinstance(e, WaitingOn)]
    assert [(w.state, w.prompt) for w in waiting] == [("input_required", "Which note?")]
    assert isinstance(events[-1], RunFinished) and events[-1].result.reason == "input_required"


def test_what_the_run_raises_is_raised_while_iterating():
    async def fetch(path: str) -> str:
        return "text"

    loop = AgentLoop([Tool("fetch", {"fetch"}, fetch, required={"path"})],
                     ScriptedPolicy([Intent.call("fetch", path="a")]), lambda o: True)
    with pytest.raises(TypeError, match="async"):
        list(loop.stream("fetch"))


def test_astream_yields_the_same_events_under_arun():
    async def events_of(loop):
        return [event async for event in loop.astream("what does todo.md say?")]

    with ChatServer(_script()) as server:
        events = asyncio.run(events_of(_chat_loop(server)))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "It says: buy milk"
    assert [type(e) for e in events if isinstance(e, ModelCallStarted | RunFinished)] == \
        [ModelCallStarted, ModelCallStarted, RunFinished]
    assert [e.record for e in events if isinstance(e, TransitionFired)] == list(events[-1].result.trace)


def test_astream_tells_a_tool_attempt_before_a_plain_tool_blocks_the_event_loop():
    seen = []

    def fetch(path: str) -> str:  # a plain function: under arun it blocks the loop while it runs
        return "seen" if any(isinstance(e, ToolAttemptStarted) for e in seen) else "not seen"

    loop = AgentLoop([Tool("fetch", {"fetch"}, fetch, required={"path"})],
                     ScriptedPolicy([Intent.call("fetch", path="a.md"), Finish("done")]),
                     lambda o: o.tool_name == "finish")

    async def consume():
        async for event in loop.astream("copy"):
            seen.append(event)

    asyncio.run(consume())
    assert seen[-1].result.state.observations[0].payload == "seen"


def test_leaving_astream_early_ends_the_run_in_fatal_error():
    calls, ended = [], _Ended()

    async def consume():
        gate = asyncio.Event()

        async def fetch(path: str) -> str:
            calls.append(path)
            await gate.wait()
            return "text"

        steps = [Intent.call("fetch", path="a.md"), Intent.call("fetch", path="b.md"), Finish("done")]
        loop = AgentLoop([Tool("fetch", {"fetch"}, fetch, required={"path"})], ScriptedPolicy(steps),
                         lambda o: o.tool_name == "finish")
        async with contextlib.aclosing(loop.astream("copy", observers=[ended])) as events:
            async for event in events:
                if isinstance(event, ToolAttemptStarted):
                    while not calls:  # the consumer leaves once the call is under way
                        await asyncio.sleep(0.01)
                    asyncio.get_running_loop().call_later(0.1, gate.set)
                    break

    asyncio.run(consume())
    assert ended.result.reason == "fatal_error" and isinstance(ended.result.error, StreamClosed)
    assert calls == ["a.md"]  # the call under way finished; nothing after it ran


def _astream_left_at(loop, goal, kind, ended):
    """Iterate `loop.astream(goal)` (closed as `async with aclosing` closes it) and leave at
    its first event of type `kind`; `ended` is told how the run ended."""
    async def consume():
        async with contextlib.aclosing(loop.astream(goal, observers=[ended])) as events:
            async for event in events:
                if isinstance(event, kind):
                    break

    asyncio.run(consume())


def test_an_astream_left_at_a_tool_attempts_start_makes_no_call_of_it():
    """Under arun the consumer reads an attempt's start before the call is made: leaving
    there leaves before the call, so it is not made."""
    calls, ended = [], _Ended()

    async def fetch(path: str) -> str:
        calls.append(path)
        return "text"

    loop = AgentLoop([Tool("fetch", {"fetch"}, fetch, required={"path"})],
                     ScriptedPolicy([Intent.call("fetch", path="a.md"), Finish("done")]), lambda o: o.tool_name == "finish")

    _astream_left_at(loop, "copy", ToolAttemptStarted, ended)
    assert calls == [] and "before a call of tool 'fetch'" in str(ended.result.error)


def test_a_streamed_run_with_no_consumer_work_keeps_the_recorded_calls():
    recorder = Recorder("a", "b")
    loop = AgentLoop([Tool("write", {"write"}, recorder, optional={"path"})],
                     ScriptedPolicy([Intent.call("write", path="1"), Intent.call("write", path="2"), Finish("ok")]),
                     lambda o: o.tool_name == "finish")
    result = list(loop.stream("write"))[-1].result
    assert recorder.calls == [{"path": "1"}, {"path": "2"}] and result.reason == "verified_success"


def test_astream_of_a_replay_streams_the_replies_from_the_journal():
    with ChatServer(_script()) as server:
        recorded = _chat_loop(server).run("what does todo.md say?")

    async def events_of(loop):
        return [event async for event in loop.astream("what does todo.md say?", journal=recorded.journal)]

    with ChatServer([]) as nobody:
        events = asyncio.run(events_of(_chat_loop(nobody)))
    assert nobody.requests == [] and events[-1].result.reason == "verified_success"
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["It says: buy milk"]
    assert [e.record for e in events if isinstance(e, TransitionFired)] == list(events[-1].result.trace)


def _gated_chat_loop(server, gate, asynchronous):
    """A chat loop whose one tool waits for `gate`: the consumer leaves while it runs, and
    the run's next call would be a model request."""
    if asynchronous:
        async def read(path: str) -> str:
            await gate.wait()
            return "buy milk"
    else:
        def read(path: str) -> str:
            gate.wait(10)
            return "buy milk"

    policy = chat_policy(server)
    return AgentLoop([Tool("read_note", {"read"}, read, required={"path"})], policy,
                     lambda o: isinstance(o.payload, Finish))


def test_a_stream_left_while_a_tool_runs_sends_no_further_model_request():
    ended, gate = _Ended(), threading.Event()
    with ChatServer(_script()) as server:
        stream = _gated_chat_loop(server, gate, asynchronous=False).stream("read", observers=[ended])
        for event in stream:
            if isinstance(event, ToolAttemptStarted):
                break
        threading.Timer(0.1, gate.set).start()  # the tool returns after the consumer has left
        stream.close()
        requests = len(server.requests)
    assert requests == 1 and isinstance(ended.result.error, StreamClosed)
    assert "before a call of model 'test-model'" in str(ended.result.error)


def test_an_astream_left_while_a_tool_runs_sends_no_further_model_request():
    ended = _Ended()

    async def consume(server):
        gate = asyncio.Event()
        loop = _gated_chat_loop(server, gate, asynchronous=True)
        async with contextlib.aclosing(loop.astream("read", observers=[ended])) as events:
            async for event in events:
                if isinstance(event, ToolAttemptStarted):
                    asyncio.get_running_loop().call_later(0.1, gate.set)
                    break

    with ChatServer(_script()) as server:
        asyncio.run(consume(server))
        requests = len(server.requests)
    assert requests == 1 and isinstance(ended.result.error, StreamClosed)


def test_an_astream_left_before_a_plain_tool_runs_makes_no_call_of_it():
    calls, ended = [], _Ended()

    def fetch(path: str) -> str:  # plain: under arun it would run inline on the event loop
        calls.append(path)
        return "text"

    steps = [Intent.call("fetch", path="a.md"), Intent.call("fetch", path="b.md"), Finish("done")]
    loop = AgentLoop([Tool("fetch", {"fetch"}, fetch, required={"path"})], ScriptedPolicy(steps),
                     lambda o: o.tool_name == "finish")

    _astream_left_at(loop, "copy", ToolAttemptFinished, ended)
    assert calls == ["a.md"] and isinstance(ended.result.error, StreamClosed)


def test_an_astream_left_once_a_tool_returned_sends_no_further_model_request():
    """Under arun the run gives its consumer a turn before each model request too: one that
    leaves on reading a tool's result leaves before the request that would tell the model."""
    ended = _Ended()

    with ChatServer(_script()) as server:
        _astream_left_at(_chat_loop(server), "read", ToolAttemptFinished, ended)
        requests = len(server.requests)
    assert requests == 1 and "before a call of model 'test-model'" in str(ended.result.error)


def _counting_loop():
    return AgentLoop([read_note], ScriptedPolicy([Intent.call("read_note", path="todo.md"), Finish("done")]),
                     lambda o: o.tool_name == "finish")


def test_a_stream_runs_under_the_run_id_it_is_given():
    *_, finished = _counting_loop().stream("read todo.md", run_id="streamed-1")
    assert finished.result.trace.run_id == "streamed-1"


def test_a_stream_goes_on_from_the_state_of_an_earlier_run():
    earlier = _counting_loop().run("read todo.md")
    *_, finished = _counting_loop().stream("read it again", state=earlier.state)
    assert len(finished.result.state.observations) == 2 * len(earlier.state.observations)


def test_a_streamed_replay_replays_the_goal_and_the_state_it_is_given():
    earlier = _counting_loop().run("read todo.md")
    again = _counting_loop().run("read it again", state=earlier.state)
    *_, replayed = _counting_loop().stream("read it again", state=earlier.state, journal=again.journal)
    assert replayed.result.trace == again.trace
    assert replayed.result.state.observations == again.state.observations


def test_a_streamed_replay_replays_the_goal_it_is_given_not_the_recorded_one():
    from forge.records.journal import JournalMiss

    def reading(goal, state):
        return Intent.call("read_note", path=goal) if not state.observations else Finish("done")

    loop = AgentLoop([read_note], reading, lambda o: o.tool_name == "finish")
    recorded = loop.run("todo.md")
    with pytest.raises(JournalMiss):
        loop.replay(recorded.journal, "other.md")
    with pytest.raises(JournalMiss):
        list(loop.stream("other.md", journal=recorded.journal))
