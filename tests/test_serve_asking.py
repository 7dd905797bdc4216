"""How a served run asks the MCP client's user by round trips (`forge.serve.asking`): the
question leaves the run with its journal so far in a signed request state, and the retried
call makes the run again from it, calling nothing twice, and goes on with the reply."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from forge import AgentLoop, Ask, Finish, Intent, RunStart, tool
from forge.policy import FINISH
from forge.serve.asking import Eliciting, NeedsInput, Round, Unanswered

CALLS: list[str] = []


def finished(observation) -> bool:
    return observation.tool_name == FINISH


@tool
def measure(thing: str) -> str:
    """Measure a thing."""
    CALLS.append(f"measure {thing}")
    return f"{thing} is 3 m long"


@tool(side_effect=True)
def cut(thing: str) -> str:
    """Cut a thing."""
    CALLS.append(f"cut {thing}")
    return f"{thing} cut"


def measuring_then_asking(goal, state):
    seen = state.observations
    if not seen:
        return Intent.call("measure", thing=goal)
    if len(seen) == 1 and goal == "rope":
        return Ask("cut it where?")
    return Finish(f"{seen[0].payload}; cut at {goal}")


def cutting(goal, state):
    if not state.observations:
        return Intent.call("cut", thing=goal)
    return Finish(f"{state.observations[-1].status}: {state.observations[-1].payload}")


asking = AgentLoop([measure], measuring_then_asking, finished)
careful = AgentLoop([cut], cutting, finished, definition="approval", approver=lambda request: None)
delegating = AgentLoop([careful.as_tool("trim")], lambda goal, state: Intent.call("trim", goal=goal)
                       if not state.observations else Finish(str(state.observations[-1].payload)), finished)


@pytest.fixture(autouse=True)
def no_calls():
    CALLS.clear()


def round_trip(waiting):
    raise NeedsInput(waiting)


def first_round(loop, goal: str) -> tuple[Round, NeedsInput]:
    first = Round("served", goal)
    with pytest.raises(NeedsInput) as needed:
        loop.run(RunStart(goal, run_id="served", performer=Eliciting.maker(first, round_trip)))
    return first, needed.value


def reply(**content):
    return SimpleNamespace(action="accept", content=content)


def test_a_question_leaves_the_run_with_where_it_was_asked_and_the_journal_so_far():
    _, needed = first_round(asking, "rope")
    assert needed.waiting.prompt == "cut it where?"
    assert needed.where == ("", 6, 2)  # select -ask-> input_required fired 5; the answer is 6's call
    assert [entry.kind for entry in needed.journals[""]] == ["policy", "tool", "verify", "policy"]


def test_the_retried_call_goes_on_with_the_reply_and_calls_no_tool_twice():
    first, needed = first_round(asking, "rope")
    second = Round.decode(first.encode(needed, None), reply(reply="the middle"), None)
    result = asking.run(RunStart("rope", run_id="served", performer=Eliciting.maker(second, round_trip)))
    assert result.answer == "rope is 3 m long; cut at the middle"
    assert CALLS == ["measure rope"]


def test_a_childs_approval_leaves_both_runs_journals_and_the_retry_approves_that_exact_call():
    first, needed = first_round(delegating, "hedge")
    assert needed.waiting.run == "served/trim.1" and needed.where[0] == "trim.1"
    assert set(needed.journals) == {"", "trim.1"} and CALLS == []
    second = Round.decode(first.encode(needed, None), reply(approve=True), None)
    result = delegating.run(RunStart("hedge", run_id="served", performer=Eliciting.maker(second, round_trip)))
    assert result.answer == "ok: hedge cut" and CALLS == ["cut hedge"]


def test_a_declined_approval_rejects_the_call():
    first, needed = first_round(delegating, "hedge")
    second = Round.decode(first.encode(needed, None), SimpleNamespace(action="decline", content=None), None)
    result = delegating.run(RunStart("hedge", run_id="served", performer=Eliciting.maker(second, round_trip)))
    assert result.answer.startswith("retryable_error") and CALLS == []


def test_a_declined_question_is_unanswered_naming_it():
    first, needed = first_round(asking, "rope")
    with pytest.raises(Unanswered, match="waits in input_required: cut it where\\? .the client's user declined"):
        Round.decode(first.encode(needed, None), SimpleNamespace(action="decline", content=None), None)


def test_a_request_state_changed_by_the_client_is_refused():
    first, needed = first_round(asking, "rope")
    state = first.encode(needed, None)
    text, _, signature = state.rpartition(".")
    forged = text[:-4] + ("AAAA" if not text.endswith("AAAA") else "BBBB") + "." + signature
    with pytest.raises(Unanswered, match="not one this server made"):
        Round.decode(forged, reply(reply="x"), None)


def test_a_request_state_is_good_only_for_the_tool_whose_call_made_it():
    first = Round("served", "rope", tool="asking")
    with pytest.raises(NeedsInput) as needed:
        asking.run(RunStart("rope", run_id="served", performer=Eliciting.maker(first, round_trip)))
    state = first.encode(needed.value, None)
    with pytest.raises(Unanswered, match="a call of 'asking''s, not of 'delegating''s"):
        Round.decode(state, reply(reply="x"), None, "delegating")
    assert Round.decode(state, reply(reply="the middle"), None, "asking").tool == "asking"


# --- a durable loop served: a call is a durable run, resumed by the retried call -----------


def test_a_served_durable_loop_waits_in_its_database_and_the_retried_call_resumes_it(make):
    from eliciting_client import call_answering

    from forge.serve import mcp_server, served_durables, served_tools

    durable = make(careful)
    named = {"careful": durable}
    server = mcp_server(served_tools(named), "test", served_durables(named))
    result, asked = call_answering(server, "careful", {"goal": "hedge"}, [("accept", {"approve": True})])
    assert not result.is_error and result.content[0].text == "ok: hedge cut"
    assert asked[0].message == 'may it call cut({"thing": "hedge"})?' and CALLS == ["cut hedge"]


def test_a_served_durable_run_a_client_cannot_be_asked_about_says_how_to_answer_it(make):
    from eliciting_client import call_answering

    from forge.serve import mcp_server, served_durables, served_tools

    durable = make(careful)
    named = {"careful": durable}
    server = mcp_server(served_tools(named), "test", served_durables(named))
    result, _ = call_answering(server, "careful", {"goal": "hedge"}, [])
    assert result.is_error and "waits in approval_required: may it call cut(" in result.content[0].text
    run_id = result.content[0].text.split()[3]
    assert durable.status(run_id).status == "waiting" and CALLS == []


# --- what a client is told where the run cannot go on -------------------------------------


def test_a_client_that_cannot_be_asked_is_told_what_the_run_asks_the_call_and_its_arguments():
    from eliciting_client import call_answering

    from forge.serve import mcp_server, served_tools

    server = mcp_server(served_tools({"careful": careful}), "test")
    result, _ = call_answering(server, "careful", {"goal": "hedge"}, [])
    text = result.content[0].text
    assert result.is_error and 'waits in approval_required: may it call cut({"thing": "hedge"})?' in text
    assert "(the client cannot be asked)" in text and CALLS == []


def test_a_blank_goal_is_an_error_result_naming_it_not_an_internal_error():
    from eliciting_client import call_answering

    from forge.serve import mcp_server, served_tools

    server = mcp_server(served_tools({"asking": asking}), "test")
    result, _ = call_answering(server, "asking", {"goal": "   "}, [])
    assert result.is_error and result.content[0].text == "asking: the goal is blank; give the tool a goal to work on"
    assert CALLS == []


def _same_state_sent_twice(server, tool, goal, content):
    """The first call of `tool` (it asks), then the retried call with `content` as the reply,
    sent twice with the same request state: what each answered."""
    import anyio
    import mcp
    import mcp_types as types

    async def never(context, params):  # declares elicitation; the rounds are driven by hand here
        raise AssertionError("asked in place")

    async def session():
        async with mcp.Client(server, read_timeout_seconds=60, elicitation_callback=never) as client:
            first = await client.session.call_tool(tool, {"goal": goal}, allow_input_required=True)
            responses = {"forge": types.ElicitResult(action="accept", content=content)}
            answered = [await client.session.call_tool(tool, {"goal": goal}, input_responses=responses,
                                                       request_state=first.request_state, allow_input_required=True)
                        for _ in range(2)]
            return first, answered

    return anyio.run(session)


def test_a_request_state_sent_again_is_refused_and_runs_nothing_again():
    from forge.serve import mcp_server, served_tools

    server = mcp_server(served_tools({"careful": careful}), "test")
    first, (once, again) = _same_state_sent_twice(server, "careful", "hedge", {"approve": True})
    assert first.request_state and not once.is_error and once.content[0].text == "ok: hedge cut"
    assert again.is_error and "the request state was used already" in again.content[0].text
    assert CALLS == ["cut hedge"]


def test_a_durable_runs_request_state_sent_again_is_refused_and_runs_nothing_again(make):
    from forge.serve import mcp_server, served_durables, served_tools

    named = {"careful": make(careful)}
    server = mcp_server(served_tools(named), "test", served_durables(named))
    _, (once, again) = _same_state_sent_twice(server, "careful", "hedge", {"approve": True})
    assert not once.is_error and once.content[0].text == "ok: hedge cut"
    assert again.is_error and "the request state was used already" in again.content[0].text
    assert CALLS == ["cut hedge"]


def test_a_request_state_older_than_its_lifetime_is_refused(monkeypatch):
    import forge.serve.asking

    first, needed = first_round(asking, "rope")
    state = first.encode(needed, None)
    monkeypatch.setattr(forge.serve.asking, "STATE_LIFETIME", -1.0)
    with pytest.raises(Unanswered, match="the request state expired"):
        Round.decode(state, reply(reply="the middle"), None)


def test_a_request_state_brought_to_another_tool_of_the_server_is_refused_and_runs_nothing():
    import anyio
    import mcp
    import mcp_types as types

    from forge.serve import mcp_server, served_tools

    server = mcp_server(served_tools({"careful": careful, "asking": asking}), "test")

    async def never(context, params):
        raise AssertionError("asked in place")

    async def session():
        async with mcp.Client(server, read_timeout_seconds=60, elicitation_callback=never) as client:
            first = await client.session.call_tool("careful", {"goal": "hedge"}, allow_input_required=True)
            responses = {"forge": types.ElicitResult(action="accept", content={"reply": "the middle"})}
            return await client.session.call_tool("asking", {"goal": "rope"}, input_responses=responses,
                                                  request_state=first.request_state, allow_input_required=True)

    other = anyio.run(session)
    assert other.is_error and "a call of 'careful''s, not of 'asking''s" in other.content[0].text
    assert CALLS == []


def test_a_child_made_in_a_later_round_is_numbered_after_the_children_of_earlier_rounds():
    """Two children, each asking its approval in a round of its own: the second is made in
    the last round as `trim.2` at the transition a run approved in memory makes it, after
    the first, which ran in an earlier round. (The first is not among the last round's
    `result.children`: it ran in another request and is only counted here.)"""
    def trimming_twice(goal, state):
        done = len(state.observations)
        return Intent.call("trim", goal=f"{goal} {done}") if done < 2 else Finish("trimmed")

    twice = AgentLoop([careful.as_tool("trim")], trimming_twice, finished)
    rounds, state = 0, Round("served", "hedge")
    while True:
        try:
            result = twice.run(RunStart("hedge", run_id="served", performer=Eliciting.maker(state, round_trip)))
            break
        except NeedsInput as needed:
            rounds += 1
            state = Round.decode(state.encode(needed, None), reply(approve=True), None)
    assert rounds == 2 and result.answer == "trimmed" and CALLS == ["cut hedge 0", "cut hedge 1"]
    approving = AgentLoop([cut], cutting, finished, definition="approval", approver=lambda request: True)
    expected = AgentLoop([approving.as_tool("trim")], trimming_twice, finished).run("hedge", run_id="served")
    last = expected.children[-1]
    assert [(c.path, c.tool, c.transition) for c in result.children] == [(last.path, last.tool, last.transition)] \
        == [("served/trim.2", "trim", 6)]


def test_a_grandchilds_question_names_the_grandchild():
    middle = AgentLoop([careful.as_tool("trim")], lambda goal, state: Intent.call("trim", goal=goal)
                       if not state.observations else Finish(str(state.observations[-1].payload)), finished)
    top = AgentLoop([middle.as_tool("garden")], lambda goal, state: Intent.call("garden", goal=goal)
                    if not state.observations else Finish(str(state.observations[-1].payload)), finished)
    _, needed = first_round(top, "hedge")
    assert needed.waiting.run == "served/garden.1/trim.1"
    assert needed.where[0] == "garden.1/trim.1"


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_served_runs_transient_tool_error_waits_its_backoff_and_is_retried(asynchronous):
    import asyncio

    from forge import Clocks, Retry, TransientToolError

    tries, waits = [], []

    @tool
    def flaky(thing: str) -> str:
        """Fail once, then measure."""
        tries.append(thing)
        if len(tries) == 1:
            raise TransientToolError("busy")
        return "measured"

    async def waited(seconds):
        waits.append(seconds)

    loop = AgentLoop([flaky], lambda goal, state: Intent.call("flaky", thing=goal) if not state.observations
                     else Finish(str(state.observations[-1].payload)), finished,
                     retry=Retry(max_attempts=2, base_delay=0.5), clocks=Clocks(sleep=waits.append, async_sleep=waited))
    performer = Eliciting.maker(Round("served", "rope"), round_trip)
    if asynchronous:
        result = asyncio.run(loop.arun(RunStart("rope", run_id="served", performer=performer)))
    else:
        result = loop.run(RunStart("rope", run_id="served", performer=performer))
    assert result.answer == "measured" and tries == ["rope", "rope"]
    assert len(waits) == 1 and 0 < waits[0] <= 0.5  # the backoff (with jitter), waited through the loop's own sleep


# --- a durable loop served tells its progress as a loop in memory does ------------------------


def _progress_of(server, tool, arguments, replies=()):
    """Call `tool` with a client that asks for progress (and answers `replies` in turn):
    the result and the progress it was told, as (number, message)."""
    import anyio
    import mcp
    from mcp import types

    told, asked = [], []

    async def progress(done, total, message):
        told.append((done, message))

    async def answer(context, params):
        asked.append(params)
        action, content = replies[len(asked) - 1]
        return types.ElicitResult(action=action, content=content)

    async def session():
        async with mcp.Client(server, read_timeout_seconds=60,
                              elicitation_callback=answer if replies else None) as client:
            return await client.call_tool(tool, arguments, progress_callback=progress)

    return anyio.run(session), told


def test_a_served_durable_run_tells_each_transition_as_progress_as_one_in_memory_does(make):
    from forge.serve import mcp_server, served_durables, served_tools

    plain = AgentLoop([measure], measuring_then_asking, finished)
    durable = make(AgentLoop([measure], measuring_then_asking, finished))
    result, told = _progress_of(mcp_server(served_tools({"measuring": durable}), "test",
                                           served_durables({"measuring": durable})), "measuring", {"goal": "hedge"})
    _, in_memory = _progress_of(mcp_server(served_tools({"measuring": plain}), "test"), "measuring", {"goal": "hedge"})
    assert not result.is_error and result.content[0].text == "hedge is 3 m long; cut at hedge"
    assert told == in_memory and [number for number, _ in told] == list(range(1, 8))  # its 7 transitions
    assert told[0] == (1, "select -choose-> execute")


def test_a_served_durable_runs_progress_is_numbered_on_across_its_question(make):
    from forge.serve import mcp_server, served_durables, served_tools

    durable = make(careful)
    server = mcp_server(served_tools({"careful": durable}), "test", served_durables({"careful": durable}))
    result, told = _progress_of(server, "careful", {"goal": "hedge"}, [("accept", {"approve": True})])
    assert not result.is_error and CALLS == ["cut hedge"]
    numbers = [number for number, _ in told]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) > 6
    assert any("approval_required" in message for _, message in told)  # the wait, then what came after it
    assert told[-1][1].endswith("-> verified_success")
