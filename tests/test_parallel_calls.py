"""Parallel tool calls (issue 33, item 3): when a policy asks for several calls at once (a
list of `Intent`s, or a model reply with several tool calls), the leading calls without side
effects are made together — at most `Limits(max_parallel=...)` at a time, in `run` and
`arun` — through the definition's own `execute_batch` state; each is observed in the order
asked and counts a step; side effects still run one at a time, in order, each with its own
approval and key. Concurrency is proven with barriers (a call that ran alone would wait
for the others forever), never with a wall-clock limit."""

import asyncio
import threading

import pytest
from chat_server import ChatServer, reply
from models import chat_policy

from forge import AgentLoop, Finish, Intent, Limits, Retry, ScriptedPolicy, Tool, tool
from forge.agent.retry import PermanentToolError, ToolError, TransientToolError
from forge.check import check_definition
from forge.diagram import diagram_text
from forge.events import RunFinished, ToolAttemptStarted, TransitionFired
from forge.inspect import html


def _together(count):
    """A read-only tool whose calls return only once `count` of them are running at once."""
    barrier = threading.Barrier(count, timeout=10)

    @tool
    def lookup(n: int) -> str:
        """Look item n up."""
        barrier.wait()
        return f"item {n}"

    return lookup


def _calls(name, count):
    return [Intent.call(name, n=n) for n in range(count)]


def _finished(observation):
    return observation.tool_name == "finish"


def test_calls_asked_for_at_once_are_made_together_and_observed_in_order():
    lookup = _together(4)
    result = AgentLoop([lookup], ScriptedPolicy([_calls("lookup", 4), Finish("done")]), _finished).run("look")
    assert result.reason == "verified_success"
    assert [(o.sequence, o.payload) for o in result.state.observations[:4]] == [(1, "item 0"), (2, "item 1"),
                                                                                 (3, "item 2"), (4, "item 3")]
    select, together, observe = result.trace[:3]
    assert (select.dest, select.verdict, select.detail["tools"]) == ("execute_batch", "batched", ["lookup"] * 4)
    assert (together.source, together.dest, together.verdict) == ("execute_batch", "observe", "ok")
    assert together.detail["statuses"] == ["ok"] * 4 and together.detail["parallel"] == 4
    assert observe.detail["statuses"] == ["ok"] * 4


def test_each_call_made_together_counts_a_step():
    lookup = _together(3)
    result = AgentLoop([lookup], ScriptedPolicy([_calls("lookup", 3), Finish("done")]), _finished).run("look")
    assert result.steps == 4 and len(result.trace) == 7


def test_the_journal_keeps_the_calls_in_the_order_asked_whatever_order_they_finish_in():
    finished = []
    release = [threading.Event() for _ in range(3)]

    @tool
    def slow(n: int) -> int:
        """Return n once released; the last asked is released first."""
        if n < 2:
            release[n + 1].wait(10)
        finished.append(n)
        release[n].set()
        return n

    result = AgentLoop([slow], ScriptedPolicy([_calls("slow", 3), Finish("done")]), _finished).run("go")
    assert finished == [2, 1, 0]
    assert [e.identity for e in result.journal if e.kind == "tool"] == [{"n": 0}, {"n": 1}, {"n": 2}]


def test_at_most_max_parallel_calls_run_at_the_same_time():
    running, most, lock = [0], [0], threading.Lock()
    pairs = threading.Barrier(2, timeout=10)

    @tool
    def lookup(n: int) -> int:
        """Look item n up."""
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        pairs.wait()  # two at once, always: never one alone, never three
        with lock:
            running[0] -= 1
        return n

    loop = AgentLoop([lookup], ScriptedPolicy([_calls("lookup", 4), Finish("done")]), _finished,
                     limits=Limits(max_parallel=2))
    result = loop.run("look")
    assert result.reason == "verified_success" and most[0] == 2
    assert result.trace[1].detail["parallel"] == 2


def test_under_arun_at_most_max_parallel_async_calls_run_at_the_same_time():
    """Four `async def` calls with a bound of 2: each waits until a second one runs beside it
    (an asyncio barrier of two), and counts how many run at once: never more than two."""
    running, most, pairs = [0], [0], _AsyncPairs()

    async def lookup(n: int) -> int:
        running[0] += 1
        most[0] = max(most[0], running[0])
        await pairs.wait()
        await asyncio.sleep(0)  # let any third call that was wrongly let in start before this one ends
        running[0] -= 1
        return n

    async def go():
        loop = AgentLoop([Tool("lookup", {"lookup"}, lookup, required={"n"})],
                         ScriptedPolicy([_calls("lookup", 4), Finish("done")]), _finished, limits=Limits(max_parallel=2))
        return await asyncio.wait_for(loop.arun("look"), 30)

    result = asyncio.run(go())
    assert result.reason == "verified_success" and most[0] == 2
    assert result.trace[1].detail["parallel"] == 2


class _AsyncPairs:
    """A barrier of two for tasks: each wait returns once a second task has come to it."""

    def __init__(self) -> None:
        self.waiting: asyncio.Future[None] | None = None

    async def wait(self) -> None:
        if self.waiting is None:
            self.waiting = asyncio.get_running_loop().create_future()
            await self.waiting
            return
        waiting, self.waiting = self.waiting, None
        waiting.set_result(None)


def test_with_max_parallel_one_each_call_is_a_step_of_its_own_and_the_plan_is_made_before_the_policy_is_asked():
    asked = []

    @tool
    def lookup(n: int) -> int:
        """Look item n up."""
        return n

    def policy(goal, state):
        asked.append(len(state.observations))
        left = [n for n in range(3) if n >= len(state.observations)]
        return [Intent.call("lookup", n=n) for n in left] if left else Finish("done")

    result = AgentLoop([lookup], policy, _finished, limits=Limits(max_parallel=1)).run("look")
    assert "execute_batch" not in {r.dest for r in result.trace}
    assert [o.payload for o in result.state.observations[:3]] == [0, 1, 2] and asked == [0, 3]


def test_side_effects_are_never_made_together_and_run_in_the_order_asked():
    done = []
    write = Tool("write", {"write"}, lambda text: done.append(text) or text, {"text"}, side_effect=True)
    script = ScriptedPolicy([[Intent.call("write", text="a"), Intent.call("write", text="b")], Finish("done")])
    result = AgentLoop([write], script, _finished).run("write")
    assert done == ["a", "b"] and "execute_batch" not in {r.dest for r in result.trace}
    assert result.side_effects_run == 2
    assert {e.identity["text"]: e.transition for e in result.journal if e.kind == "tool"} == {"a": 2, "b": 6}


def test_each_side_effect_waits_for_its_own_approval():
    asked = []
    write = Tool("write", {"write"}, lambda text: text, {"text"}, side_effect=True)
    script = ScriptedPolicy([[Intent.call("write", text="a"), Intent.call("write", text="b")], Finish("done")])
    loop = AgentLoop([write], script, _finished, definition="approval",
                     approver=lambda request: asked.append(request.arguments["text"]) or True)
    assert loop.run("write").reason == "verified_success" and asked == ["a", "b"]


def test_only_the_leading_calls_without_side_effects_are_made_together():
    lookup = _together(2)
    write = Tool("write", {"write"}, lambda text: text, {"text"}, side_effect=True)
    script = ScriptedPolicy([[Intent.call("lookup", n=1), Intent.call("lookup", n=2), Intent.call("write", text="a")],
                             Finish("done")])
    result = AgentLoop([lookup, write], script, _finished).run("mixed")
    assert [o.tool_name for o in result.state.observations] == ["lookup", "lookup", "write", "finish"]
    assert result.trace[0].detail["tools"] == ["lookup", "lookup"]


def test_a_batch_never_takes_a_run_past_its_step_budget():
    lookup = _together(3)
    result = AgentLoop([lookup], ScriptedPolicy([_calls("lookup", 5)]), _finished, max_steps=3).run("look")
    assert result.reason == "step_budget_exhausted" and len(result.state.observations) == 3


def test_verify_is_asked_of_each_ok_observation_in_order_until_one_is_accepted():
    asked = []
    lookup = _together(3)
    result = AgentLoop([lookup], ScriptedPolicy([_calls("lookup", 3)]),
                       lambda o: asked.append(o.sequence) or o.payload == "item 1").run("look")
    assert result.reason == "verified_success" and asked == [1, 2]


def test_a_call_that_fails_is_observed_as_it_failed_among_the_others():
    barrier = threading.Barrier(3, timeout=10)

    @tool
    def lookup(n: int) -> str:
        """Look item n up."""
        barrier.wait()
        if n == 1:
            raise ToolError("item 1 is missing")
        return f"item {n}"

    result = AgentLoop([lookup], ScriptedPolicy([_calls("lookup", 3), Finish("done")]), _finished).run("look")
    assert [o.status for o in result.state.observations[:3]] == ["ok", "retryable_error", "ok"]
    assert result.trace[1].detail["errors"][1].endswith("item 1 is missing")
    assert result.reason == "verified_success"


def test_a_transient_error_is_retried_within_its_own_call():
    tries = []

    @tool
    def lookup(n: int) -> str:
        """Look item n up."""
        tries.append(n)
        if n == 0 and tries.count(0) == 1:
            raise TransientToolError("busy")
        return f"item {n}"

    result = AgentLoop([lookup], ScriptedPolicy([_calls("lookup", 2), Finish("done")]), _finished,
                       retry=Retry(max_attempts=2)).run("look")
    assert result.trace[1].detail["attempts"] == [2, 1] and result.retries == 1
    assert [o.payload for o in result.state.observations[:2]] == ["item 0", "item 1"]


def test_a_call_that_fails_for_good_ends_the_run_after_the_calls_before_it_are_observed():
    @tool
    def lookup(n: int) -> str:
        """Look item n up."""
        if n == 1:
            raise PermanentToolError("gone")
        return f"item {n}"

    result = AgentLoop([lookup], ScriptedPolicy([_calls("lookup", 3)]), _finished).run("look")
    assert result.reason == "fatal_error" and "gone" in str(result.error)
    assert [o.status for o in result.state.observations] == ["ok", "fatal_error"]
    assert result.trace[1].detail["statuses"] == ["ok", "fatal_error", "ok"]


def test_a_policy_that_returns_an_empty_list_fails_naming_what_it_may_return():
    result = AgentLoop([_together(1)], lambda goal, state: [], _finished).run("look")
    assert result.reason == "fatal_error" and "policy returned an empty list" in str(result.error)


def test_a_list_holding_a_finish_is_refused():
    result = AgentLoop([_together(1)], lambda goal, state: [Intent.call("lookup", n=1), Finish("x")],
                       _finished).run("look")
    assert result.reason == "fatal_error" and "a list holds Intents only" in str(result.error)


@pytest.mark.parametrize("kind", ["async def", "plain"])
def test_arun_makes_calls_together_too(kind):
    if kind == "async def":
        barrier = asyncio.Barrier(3)

        @tool
        async def lookup(n: int) -> str:
            """Look item n up."""
            await asyncio.wait_for(barrier.wait(), 10)
            return f"item {n}"
    else:
        lookup = _together(3)
    result = asyncio.run(AgentLoop([lookup], ScriptedPolicy([_calls("lookup", 3), Finish("done")]), _finished).arun("look"))
    assert result.reason == "verified_success" and result.trace[0].dest == "execute_batch"
    assert [o.payload for o in result.state.observations[:3]] == ["item 0", "item 1", "item 2"]


def test_a_batched_run_replays_calling_nothing():
    lookup = _together(3)
    result = AgentLoop([lookup], ScriptedPolicy([_calls("lookup", 3), Finish("done")]), _finished).run("look")

    @tool
    def lookup_never(n: int) -> str:
        """Never called."""
        raise AssertionError("a replay called a tool")

    replayed = AgentLoop([Tool("lookup", set(), lookup_never.handler, optional={"n"})], ScriptedPolicy([]),
                         _finished).replay(result.journal)
    assert [(r.source, r.dest, r.verdict, dict(r.detail)) for r in replayed.trace] == \
        [(r.source, r.dest, r.verdict, dict(r.detail)) for r in result.trace]
    assert [o.payload for o in replayed.state.observations] == [o.payload for o in result.state.observations]


def test_a_stream_tells_every_attempt_of_calls_made_together():
    lookup = _together(3)
    loop = AgentLoop([lookup], ScriptedPolicy([_calls("lookup", 3), Finish("done")]), _finished)
    events = list(loop.stream("look"))
    assert sum(isinstance(e, ToolAttemptStarted) for e in events) == 3
    assert [e.record.dest for e in events if isinstance(e, TransitionFired)][:2] == ["execute_batch", "observe"]
    assert isinstance(events[-1], RunFinished) and events[-1].result.reason == "verified_success"


@pytest.mark.parametrize("name", ["single_agent", "approval"])
def test_the_batch_is_drawn_and_checked(name):
    assert "execute_batch" in diagram_text(name, "dot") and "tools_batched" in diagram_text(name, "mermaid")
    report = check_definition(name)
    assert not report.findings and report.boundedness.bound == {"single_agent": 32, "approval": 40}[name]


def test_the_inspector_shows_the_calls_made_together():
    lookup = _together(2)
    result = AgentLoop([lookup], ScriptedPolicy([_calls("lookup", 2), Finish("done")]), _finished).run("look")
    page = html(result)
    assert "execute_batch" in page and "item 1" in page


# ChatPolicy: a reply with several tool calls, against the local chat server


def _policy(server):
    return chat_policy(server)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_model_reply_with_several_calls_is_made_together_and_answered_in_call_order(mode):
    lookup = _together(4)
    script = [reply(None, *((f"call_{n}", "lookup", {"n": n}) for n in range(4))), reply("all four looked up")]
    with ChatServer(script) as server:
        loop = AgentLoop([lookup], _policy(server), _finished)
        result = loop.run("look up four") if mode == "sync" else asyncio.run(loop.arun("look up four"))
    assert result.reason == "verified_success" and result.trace[0].dest == "execute_batch"
    answered = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in answered] == [(f"call_{n}", f"item {n}") for n in range(4)]


def test_a_side_effect_in_a_model_reply_runs_alone_in_its_place():
    lookup = _together(2)
    order = []
    write = Tool("write", {"write"}, lambda text: order.append(text) or "written", {"text"}, side_effect=True)
    script = [reply(None, ("c1", "lookup", {"n": 1}), ("c2", "lookup", {"n": 2}), ("c3", "write", {"text": "x"})),
              reply("done")]
    with ChatServer(script) as server:
        result = AgentLoop([lookup, write], _policy(server), _finished).run("look then write")
    assert [o.tool_name for o in result.state.observations] == ["lookup", "lookup", "write", "finish"]
    assert [r.dest for r in result.trace[:2]] == ["execute_batch", "observe"]
    answered = [m["tool_call_id"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert answered == ["c1", "c2", "c3"] and len(server.requests) == 2


def test_the_narration_says_what_the_calls_made_together_did():
    from forge.narrate import describe

    lookup = _together(2)
    result = AgentLoop([lookup], ScriptedPolicy([_calls("lookup", 2), Finish("done")]), _finished).run("look")
    told = [describe(record) for record in result.trace[:3]]
    assert told[0].endswith("chose 2 calls to make together: lookup, lookup")
    assert told[1].endswith("2 calls made together (lookup: ok, lookup: ok)")
    assert told[2].endswith("2 observations: ok, ok · [item 0, item 1]")


def _batch_of(outcomes):
    """The record of a batch whose calls end as `outcomes` say (ok, retry, fatal), in order."""
    @tool
    def lookup(n: int) -> str:
        """Look item n up."""
        if outcomes[n] == "fatal":
            raise PermanentToolError(f"item {n} is gone")
        if outcomes[n] == "retry":
            raise TransientToolError(f"item {n} is busy")
        return f"item {n}"

    loop = AgentLoop([lookup], ScriptedPolicy([_calls("lookup", len(outcomes)), Finish("done")]), _finished,
                     retry=Retry(max_attempts=1))
    return loop.run("look").trace[1]


@pytest.mark.parametrize(("outcomes", "verdict"), [
    (["ok", "fatal", "ok"], "fatal_error"),  # any call failed for good: the batch did
    (["retry", "ok"], "ok"),  # one came back: the batch went on
    (["retry", "retry"], "retryable_error"),  # none came back, none failed for good
])
def test_a_batchs_verdict_is_its_worst_lasting_outcome(outcomes, verdict):
    assert _batch_of(outcomes).verdict == verdict


def test_a_batch_names_each_calls_error_only_when_one_failed():
    assert "errors" not in _batch_of(["ok", "ok"]).detail
    errors = _batch_of(["ok", "retry"]).detail["errors"]
    assert errors[0] is None and "item 1 is busy" in errors[1]
