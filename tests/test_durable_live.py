"""Following a running durable run: while a page follows it (`StoredRuns.follow`), the
process running its turn stores the transitions the turn fires, up to the call it is in;
a run nobody follows stores none; what a turn stored is dropped once its trace is
published. On a real DBOS SQLite database, with the run held in a tool call the test
releases."""

import threading

import pytest

from forge import AgentLoop, Finish, Intent, tool
from forge.durable.runs import StoredRuns
from forge.durable.workflow import HOST

RELEASE = threading.Event()
ENTERED = threading.Event()


@tool
def slow(n: int) -> int:
    """Its second call waits until the test lets it go."""
    if n == 2:
        ENTERED.set()
        RELEASE.wait(30)
    return n


def two_calls(goal, state):
    return Intent.call("slow", n=len(state.observations) + 1) if len(state.observations) < 2 else Finish("ok")


@pytest.fixture
def held(make, db):
    """`held(run_id)`: a run started and held in its second tool call; released (and waited
    for) after the test."""
    RELEASE.clear()
    ENTERED.clear()
    durable = make(AgentLoop([slow], two_calls, lambda o: o.tool_name == "finish"))

    started = []

    def start(run_id):
        durable.start("hold on", run_id=run_id)
        started.append(run_id)
        assert ENTERED.wait(30), "the run never reached its second call"
        return durable

    yield start
    RELEASE.set()
    for run_id in started:  # finished before the next test, or DBOS's shutdown, comes
        durable.wait(run_id, timeout=30)


@pytest.fixture
def runs(db):
    stored = StoredRuns(db)
    yield stored
    stored.close()


def test_a_followed_turn_stores_what_it_fired_up_to_the_call_it_is_in(held, runs):
    durable = held("followed-1")
    assert runs.follow("followed-1")
    HOST.live.look()
    so_far = runs.fired_so_far("followed-1")
    RELEASE.set()
    whole = durable.wait("followed-1", timeout=30).records
    assert so_far and [(r.source, r.trigger, r.dest, r.step) for r in so_far] == \
        [(r.source, r.trigger, r.dest, r.step) for r in whole[:len(so_far)]]
    held_in = whole[len(so_far)]  # the transition whose action is the call the run was held in
    assert (held_in.step, held_in.trigger, held_in.detail["tool"]) == (2, "call", "slow")
    assert so_far[-1].detail["arguments"] == '{"n": 2}'  # the call it was held in, as chosen


def test_a_turn_nobody_follows_stores_no_transitions(held, runs):
    held("unfollowed-1")
    HOST.live.look()
    assert runs.fired_so_far("unfollowed-1") == []


def test_what_a_turn_stored_is_dropped_once_it_ends(held, runs):
    durable = held("followed-2")
    runs.follow("followed-2")
    HOST.live.look()
    assert runs.fired_so_far("followed-2")
    RELEASE.set()
    assert durable.wait("followed-2", timeout=30).status == "finished"
    assert runs.fired_so_far("followed-2") == []


def test_the_process_looks_by_itself_while_a_turn_runs(held, runs):
    held("followed-3")
    runs.follow("followed-3")
    for _ in range(200):
        if runs.fired_so_far("followed-3"):
            break
        threading.Event().wait(0.05)
    assert runs.fired_so_far("followed-3"), "no transition stored within 10 s of following"


def test_a_run_followed_long_ago_leaves_no_row_behind(runs):
    import sqlalchemy as sa

    runs.database.watch("followed-long-ago", -7200)  # its page closed two hours ago
    runs.follow("followed-now")
    with runs.database.engine.connect() as connection:
        followed = {row[0] for row in connection.execute(sa.select(runs.database.watches.c.run_id))}
    assert "followed-now" in followed and "followed-long-ago" not in followed


def test_a_followed_async_turn_stores_what_it_fired_too(make, runs):
    import asyncio

    release = threading.Event()

    @tool
    async def held(n: int) -> int:
        """Its second call waits, without holding the event loop, until the test lets it go."""
        while n == 2 and not release.is_set():
            await asyncio.sleep(0.02)
        return n

    def policy(goal, state):
        return Intent.call("held", n=len(state.observations) + 1) if len(state.observations) < 2 else Finish("ok")

    durable = make(AgentLoop([held], policy, lambda o: o.tool_name == "finish"))

    async def follow():
        await durable.astart("hold on", run_id="followed-async")
        runs.follow("followed-async")
        for _ in range(200):
            HOST.live.look()
            if len(runs.fired_so_far("followed-async")) == 5:  # step 1's four and the held call's choice
                break
            await asyncio.sleep(0.05)
        so_far = runs.fired_so_far("followed-async")
        release.set()
        return so_far, await durable.await_for("followed-async", timeout=30)

    try:
        so_far, done = asyncio.run(follow())
    finally:
        release.set()
    assert done.status == "finished" and len(so_far) == 5
    assert [r.trigger for r in so_far] == [r.trigger for r in done.records[:5]]


class Unwritable:
    """A run under way whose records cannot be read (as a detail JSON cannot hold would be)."""

    def __init__(self, database, run_id):
        self.database, self.run_id, self.shown = database, run_id, 3

    def transitions(self, first, count):
        raise TypeError("Object of type set is not JSON serializable")


def test_a_run_whose_transitions_cannot_be_written_costs_only_its_own_live_view(held, runs):
    from forge.durable.live import LiveRuns

    live = LiveRuns(every=3600)  # its thread looks once, then sleeps: the look that counts is the test's
    runs.follow("unwritable")
    live.started(Unwritable(runs.database, "unwritable"))
    durable = held("followed-4")
    runs.follow("followed-4")
    live.started(next(t.performer for t in HOST.live._runs.values() if t.performer.run_id == "followed-4"))
    live.look()  # raises nothing
    assert runs.fired_so_far("unwritable") == [] and len(runs.fired_so_far("followed-4")) == 5
    RELEASE.set()
    assert durable.wait("followed-4", timeout=30).status == "finished"


def test_a_stored_run_streams_its_transitions_as_it_moves_then_stops(held, runs):
    from forge.events import RunStopped, ToolAttemptFinished, TransitionFired

    durable = held("streamed-1")
    events = []

    def read():
        events.extend(runs.stream("streamed-1", every=0.02))

    reader = threading.Thread(target=read)
    reader.start()
    for _ in range(500):  # what it fired up to the call it is held in, before it moves on
        if sum(isinstance(e, TransitionFired) for e in events) >= 5:
            break
        threading.Event().wait(0.02)
    before = sum(isinstance(e, TransitionFired) for e in events)
    RELEASE.set()
    reader.join(30)
    whole = durable.wait("streamed-1", timeout=30)
    fired = [e.record for e in events if isinstance(e, TransitionFired)]
    assert 5 <= before < len(fired)
    assert [(r.sequence, r.source, r.trigger, r.dest) for r in fired] == \
        [(r.sequence, r.source, r.trigger, r.dest) for r in whole.records]
    assert isinstance(events[-1], RunStopped) and events[-1].result.status == "finished"
    attempts = [e.attempt for e in events if isinstance(e, ToolAttemptFinished)]
    assert [(a.tool, a.number, a.error) for a in attempts] == [("slow", 1, None)] * 2
    for position, event in enumerate(events):  # each attempt comes before the record of its transition
        if isinstance(event, ToolAttemptFinished):
            after = next(e.record for e in events[position:] if isinstance(e, TransitionFired))
            assert after.source == "execute"


def test_forge_runs_follow_prints_a_stored_runs_transitions_until_it_ends(make, db):
    from builders import forge

    durable = make(AgentLoop([slow], two_calls, lambda o: o.tool_name == "finish"))
    RELEASE.set()
    done = durable.run("follow me", run_id="followed-cli", timeout=30)
    shown = forge("runs", "follow", "followed-cli", "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    attempts = [line for line in lines if " attempt " in line]
    assert attempts == ["  slow attempt 1 returned"] * 2
    assert len(lines) == len(done.records) + len(attempts) + 1
    assert lines[-1].startswith("finished: verified_success")
    refused = forge("runs", "follow", "followed-cli", "--db", str(db), "--every", "0")
    assert refused.returncode == 1 and "--every must be a number of seconds > 0" in refused.stderr


def test_following_a_waiting_run_says_what_it_waits_for(make, db):
    from forge.events import RunStopped, WaitingOn

    @tool(side_effect=True)
    def write(n: int) -> int:
        """Write n."""
        return n

    loop = AgentLoop([write], lambda goal, state: Intent.call("write", n=1), lambda o: True, definition="approval",
                     approver=lambda request: None)
    durable = make(loop)
    durable.run("ask first", run_id="followed-waiting", timeout=30)
    with StoredRuns(db) as reader:
        events = list(reader.stream("followed-waiting", every=0.02))
    waiting = [e.waiting for e in events if isinstance(e, WaitingOn)]
    assert [w.state for w in waiting] == ["approval_required"] and waiting[0].tool == "write"
    assert isinstance(events[-1], RunStopped) and events[-1].result.status == "waiting"


def test_a_journal_gives_each_tool_attempt_its_number_and_the_wait_before_it():
    from forge.agent.retry import TransientToolError
    from forge.durable.runs import journal_events
    from forge.events import ToolAttemptFinished
    from forge.records.journal import JournalEntry

    busy = TransientToolError("busy")
    calls = [JournalEntry("r", 1, 1, "policy", "policy", ("g", 0)),
             JournalEntry("r", 2, 1, "tool", "fetch", {"n": 1}, None, busy),
             JournalEntry("r", 2, 1, "wait", "wait", 0.5),
             JournalEntry("r", 2, 1, "tool", "fetch", {"n": 1}, "ok"),
             JournalEntry("r", 6, 2, "tool", "fetch", {"n": 1}, "ok")]
    found = [(transition, e.attempt.tool, e.attempt.number, e.attempt.delay_before, e.attempt.error)
             for transition, e in journal_events(calls) if isinstance(e, ToolAttemptFinished)]
    assert found == [(2, "fetch", 1, 0.0, busy), (2, "fetch", 2, 0.5, None), (6, "fetch", 1, 0.0, None)]


def test_a_journal_gives_each_model_call_with_its_replys_deltas():
    from forge.durable.runs import journal_events
    from forge.events import ModelCallStarted, TextDelta, ToolCallDelta
    from forge.records.journal import JournalEntry

    reply = {"message": {"role": "assistant", "content": "looking",
                         "tool_calls": [{"id": "c1", "function": {"name": "fetch", "arguments": "{}"}}]}}
    found = journal_events([JournalEntry("r", 1, 1, "model", "gpt", {"model": "gpt"}, reply)])
    assert found == [(1, ModelCallStarted("gpt")), (1, TextDelta("looking")), (1, ToolCallDelta(0, "c1", "fetch", "{}"))]


def test_a_stored_model_run_streams_each_model_call_and_what_the_model_said(make, runs):
    openai = pytest.importorskip("openai")
    from chat_server import ChatServer, reply

    from forge.events import ModelCallStarted, TextDelta, ToolAttemptFinished, ToolCallDelta, TransitionFired
    from forge.models.chat import ChatPolicy

    with ChatServer([reply(None, ("c1", "slow", {"n": 1})), reply("slow said 1")]) as server:
        policy = ChatPolicy("test-model", client=openai.OpenAI(base_url=server.url, api_key="k", max_retries=0))
        durable = make(AgentLoop([slow], policy, lambda o: o.tool_name == "finish"))
        assert durable.run("call slow once", run_id="streamed-model", timeout=30).status == "finished"
    events = list(runs.stream("streamed-model", every=0.02))
    kinds = [type(e).__name__ for e in events if not isinstance(e, TransitionFired)][:5]
    assert kinds == ["ModelCallStarted", "ToolCallDelta", "ToolAttemptFinished", "ModelCallStarted", "TextDelta"]
    assert [e.model for e in events if isinstance(e, ModelCallStarted)] == ["test-model"] * 2
    assert [e.name for e in events if isinstance(e, ToolCallDelta)] == ["slow"]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["slow said 1"]
    assert [e.attempt.tool for e in events if isinstance(e, ToolAttemptFinished)] == ["slow"]
