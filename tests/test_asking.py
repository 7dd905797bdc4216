"""Agents that ask, and account: `Ask` and the `input_required` state, a conversation that
goes on from the user's reply, `result.answer`, token usage per call and in total, and the
token budget that stops a run in `budget_exhausted`."""

import asyncio
import json
from pathlib import Path

import miss_param_tasks as tasks
import pytest
from builders import tool as make_tool
from chat_server import ChatServer, reply
from models import REASON, llm

from forge import AgentLoop, Ask, Finish, Intent, Limits, ScriptedPolicy, Usage, tool
from forge.check import check_definition
from forge.errors import UsageError
from forge.machine.loader import load_definition


def answered(observation):
    return observation.tool_name == "finish"


def written_before_asking():
    """machines/single_agent.toml as it was before Ask and token budgets: neither state nor edge
    (nor the calls made together, which came later still)."""
    text = Path(load_definition("single_agent").path).read_text().split('[[transitions]]\nsource = "select"\ntrigger = "ask"')[0]
    batch = text.index("[states.execute_batch]")
    text = text[:batch] + text[text.index("[states.", batch + 1):]
    start = text.index("[states.input_required]")
    return text[:start] + text[text.index("[[transitions]]", start):]


def chat(server, **options):
    """A ChatPolicy on the local chat server (the test skips without the llm extra)."""
    openai = pytest.importorskip("openai", reason=REASON)
    return llm().ChatPolicy("test-model", client=openai.OpenAI(base_url=server.url, api_key="test"),
                            async_client=openai.AsyncOpenAI(base_url=server.url, api_key="test"), **options)


@tool
def lookup(city: str) -> str:
    """Look up a city."""
    return f"{city}: sunny"


# --- Ask, in memory -------------------------------------------------------------------


def test_a_policy_that_asks_ends_the_run_in_input_required_with_the_question():
    loop = AgentLoop([lookup], ScriptedPolicy([Ask("Which city?")]), answered)
    result = loop.run("what is the weather?")
    assert (result.reason, result.outcome, result.question) == ("input_required", "needs_input", "Which city?")
    assert result.state.observations[-1].tool_name == "ask_user"
    assert result.trace[-1].detail["ask"] == "Which city?"


def test_the_reply_is_the_next_turns_goal_and_the_conversation_goes_on():
    def policy(goal, state):
        if not state.observations:
            return Ask("Which city?")
        if state.observations[-1].tool_name == "ask_user":
            return Intent.call("lookup", city=goal)
        return Finish(state.observations[-1].payload)

    loop = AgentLoop([lookup], policy, answered)
    first = loop.run("what is the weather?")
    second = loop.run("Oslo", state=first.state)
    assert (second.reason, second.answer, second.question) == ("verified_success", "Oslo: sunny", None)
    assert [o.tool_name for o in second.state.observations] == ["ask_user", "lookup", "finish"]


def test_an_ask_with_a_blank_question_is_refused_when_made():
    with pytest.raises(UsageError, match="Ask.question must be a non-blank string"):
        Ask("  ")


def test_a_definition_without_the_ask_edge_fails_the_run_naming_what_to_add(tmp_path):
    path = tmp_path / "older.toml"
    path.write_text(written_before_asking())
    result = AgentLoop([lookup], ScriptedPolicy([Ask("Which city?")]), answered, definition=path).run("weather")
    assert result.reason == "fatal_error"
    assert "has no input_required state to wait in" in str(result.error) and "policy_asked" in str(result.error)


def test_forge_check_warns_rather_than_errs_on_a_definition_written_before_asking(tmp_path):
    path = tmp_path / "older.toml"
    path.write_text(written_before_asking())
    report = check_definition(path)
    assert {(f.severity, f.code) for f in report.findings} == {("warning", "unhandled-optional-verdict")}
    assert report.ok


def test_both_shipped_definitions_have_the_ask_and_budget_edges_and_check_clean():
    for name in ("single_agent", "approval"):
        definition = load_definition(name)
        edges = {(t.source, t.dest, t.guard) for t in definition.transitions}
        assert ("select", "input_required", "policy_asked") in edges
        assert ("select", "budget_exhausted", "token_budget_exhausted") in edges
        assert definition.state("input_required").outcome == "needs_input"
        assert definition.state("budget_exhausted").outcome == "failure"
        assert check_definition(name).findings == ()


# --- the answer -------------------------------------------------------------------------


def test_result_answer_is_the_verified_finish_answer():
    loop = AgentLoop([lookup], ScriptedPolicy([Finish("42")]), lambda o: o.answer == "42")
    assert loop.run("the answer?").answer == "42"


def test_result_answer_is_none_when_the_answer_was_not_verified():
    loop = AgentLoop([lookup], ScriptedPolicy([Finish("41")] * 3), lambda o: o.answer == "42", max_steps=3)
    result = loop.run("the answer?")
    assert result.reason != "verified_success" and result.answer is None


def test_verify_can_read_the_answer_text_of_an_observation():
    loop = AgentLoop([lookup], ScriptedPolicy([Intent.call("lookup", city="Oslo"), Finish("Oslo is sunny")]),
                     lambda o: "sunny" in str(o.answer))
    result = loop.run("weather in Oslo?")
    assert result.reason == "verified_success" and result.steps == 2


# --- ChatPolicy: ask_user, usage, budget ---------------------------------------------


def test_chat_policy_offers_ask_user_and_turns_its_call_into_the_question():
    with ChatServer([reply(None, ("q1", "ask_user", {"question": "Which city?"}))]) as server:
        result = AgentLoop([lookup], chat(server), answered).run("weather?")
    offered = [t["function"]["name"] for t in server.requests[0]["tools"]]
    assert offered == ["lookup", "ask_user"]
    assert (result.reason, result.question) == ("input_required", "Which city?")


def test_the_users_reply_goes_back_to_the_model_as_the_ask_user_calls_result():
    with ChatServer([reply(None, ("q1", "ask_user", {"question": "Which city?"})),
                     reply(None, ("c1", "lookup", {"city": "Oslo"})),
                     reply("Oslo is sunny.")]) as server:
        loop = AgentLoop([lookup], chat(server), answered)
        first = loop.run("weather?")
        second = loop.run("Oslo", state=first.state)
    sent = server.requests[1]["messages"]
    assert sent[-2]["tool_calls"][0]["function"]["name"] == "ask_user"
    assert sent[-1] == {"role": "tool", "tool_call_id": "q1", "content": "Oslo"}
    assert (second.reason, second.answer) == ("verified_success", "Oslo is sunny.")


def test_ask_false_offers_no_ask_user_tool():
    with ChatServer([reply("fine")]) as server:
        AgentLoop([lookup], chat(server, ask=False), answered).run("weather?")
    assert [t["function"]["name"] for t in server.requests[0]["tools"]] == ["lookup"]


def test_a_tool_named_ask_user_is_refused_while_the_policy_offers_its_own():
    clash = make_tool("ask_user")
    with pytest.raises(UsageError, match="ask=False"):
        AgentLoop([clash], llm().ChatPolicy("m", client=object()), answered)


def test_an_ask_user_call_without_a_question_is_told_to_the_model_as_an_error():
    with ChatServer([reply(None, ("q1", "ask_user", {})), reply("never mind")]) as server:
        AgentLoop([lookup], chat(server), answered).run("weather?")
    told = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert told[0]["content"].startswith("error: ask_user needs a non-blank question")


@pytest.mark.parametrize("task", tasks.TASKS, ids=lambda task: task.name)
def test_miss_param_tasks_ask_first_then_make_the_call_with_the_users_value(task):
    """A model that asks for the missing value, then calls with it: forge ends the first
    turn in input_required, and the reply's turn makes exactly the expected call."""
    with ChatServer([reply(None, ("ask", "ask_user", {"question": task.question})),
                     reply(None, ("call", task.call, task.arguments)),
                     reply("Done.")]) as server:
        loop = AgentLoop(tasks.TOOLS, chat(server), answered)
        first = loop.run(task.turn)
        assert (first.reason, first.question, first.side_effects_run) == ("input_required", task.question, 0)
        second = loop.run(task.reply, state=first.state)
    assert second.reason == "verified_success"
    made = [o for o in second.state.observations if o.tool_name == task.call]
    assert len(made) == 1 and made[0].status == "ok"
    assert server.requests[1]["messages"][-1]["content"] == task.reply


def test_each_model_calls_usage_is_in_the_result_and_the_trace():
    with ChatServer([reply(None, ("c1", "lookup", {"city": "Oslo"}),
                           ) | {"_usage": {"prompt_tokens": 100, "completion_tokens": 20,
                                           "prompt_tokens_details": {"cached_tokens": 60}}},
                     reply("sunny") | {"_usage": {"prompt_tokens": 150, "completion_tokens": 5}}]) as server:
        result = AgentLoop([lookup], chat(server), answered).run("weather?")
    usage = result.usage
    assert [(c.prompt_tokens, c.completion_tokens, c.cached_tokens) for c in usage.calls] == [(100, 20, 60), (150, 5, 0)]
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens, usage.cached_tokens) == (250, 25, 275, 60)
    recorded = [m["_usage"] for r in result.trace for m in r.detail.get("messages", ()) if "_usage" in m]
    assert [u["prompt_tokens"] for u in recorded] == [100, 150]
    assert usage.calls[0].model == "test-model" and usage.calls[0].finish_reason == "tool_calls"


def test_a_runs_usage_counts_only_its_own_turns_calls():
    with ChatServer([reply(None, ("q", "ask_user", {"question": "city?"})), reply("sunny")]) as server:
        loop = AgentLoop([lookup], chat(server), answered)
        first = loop.run("weather?")
        second = loop.run("Oslo", state=first.state)
    assert (len(first.usage.calls), len(second.usage.calls)) == (1, 1)


def test_the_budget_stops_a_chat_run_before_the_call_that_would_exceed_it():
    """Each call costs 1,000 prompt + 100 completion (more than the prompt's own estimate, as
    a real prompt with its tools' schemas is); the next prompt holds the last one and its
    reply, so it costs at least 1,100. With a budget of 3,299, two calls (2,200) fit and a
    third (at least 3,300 in all) cannot: the run stops with two calls made."""
    calls = [reply(None, (f"c{n}", "lookup", {"city": f"city{n}"})) | {"_usage": {"prompt_tokens": 1000,
                                                                                    "completion_tokens": 100}}
             for n in range(6)]
    with ChatServer(calls) as server:
        result = AgentLoop([lookup], chat(server), answered, limits=Limits(token_budget=3299)).run("weather everywhere")
    assert result.reason == "budget_exhausted" and result.outcome == "failure"
    assert len(server.requests) == 2  # 2,200 used, and a third call costs at least 1,100 more
    assert result.usage.total_tokens == 2200
    stop = result.trace[-1]
    assert (stop.dest, stop.detail["tokens_used"], stop.detail["token_budget"]) == ("budget_exhausted", 2200, 3299)


def test_the_budget_stops_exactly_at_it():
    calls = [reply(None, (f"c{n}", "lookup", {"city": f"city{n}"})) | {"_usage": {"prompt_tokens": 1000,
                                                                                    "completion_tokens": 100}}
             for n in range(6)]
    with ChatServer(calls) as server:
        result = AgentLoop([lookup], chat(server), answered, limits=Limits(token_budget=3300)).run("weather everywhere")
    assert result.reason == "budget_exhausted"
    assert (len(server.requests), result.usage.total_tokens) == (3, 3300)


def test_a_policy_without_a_model_of_its_own_stops_once_its_messages_reach_the_budget():
    def policy(goal, state):
        state.messages.append({"role": "assistant", "content": "x", "_usage": {"prompt_tokens": 50,
                                                                               "completion_tokens": 0}})
        return Intent.call("lookup", city=f"c{len(state.observations)}")

    result = AgentLoop([lookup], policy, answered, limits=Limits(token_budget=120)).run("weather")
    assert result.reason == "budget_exhausted" and result.usage.total_tokens == 150 and result.steps == 3


def test_a_token_budget_needs_a_definition_that_can_stop_at_it(tmp_path):
    path = tmp_path / "older.toml"
    path.write_text(written_before_asking())
    with pytest.raises(UsageError, match="no budget_exhausted edge"):
        AgentLoop([lookup], ScriptedPolicy([]), answered, definition=path, limits=Limits(token_budget=10))


def test_a_budget_below_one_is_refused():
    with pytest.raises(UsageError, match="token_budget"):
        AgentLoop([lookup], ScriptedPolicy([]), answered, limits=Limits(token_budget=0))


def test_the_budget_stops_an_async_run_the_same_way():
    calls = [reply(None, (f"c{n}", "lookup", {"city": f"city{n}"})) | {"_usage": {"prompt_tokens": 1000,
                                                                                    "completion_tokens": 100}}
             for n in range(6)]
    with ChatServer(calls) as server:
        result = asyncio.run(AgentLoop([lookup], chat(server), answered, limits=Limits(token_budget=3300)).arun("weather"))
    assert (result.reason, len(server.requests)) == ("budget_exhausted", 3)


def test_a_replayed_chat_run_has_the_same_usage_without_calling_the_model():
    looked: list[str] = []

    @tool(name="lookup")
    def counted(city: str) -> str:
        """Look up a city (each call counted)."""
        looked.append(city)
        return f"{city}: sunny"

    with ChatServer([reply(None, ("c1", "lookup", {"city": "Oslo"})) | {"_usage": {"prompt_tokens": 7,
                                                                                    "completion_tokens": 3}},
                     reply("sunny")]) as server:
        loop = AgentLoop([counted], chat(server), answered)
        result = loop.run("weather?")
        asked, called = len(server.requests), list(looked)
        again = loop.replay(result.journal)
    assert len(server.requests) == asked and looked == called == ["Oslo"]  # the replay called no model, no tool
    assert again.usage == result.usage and isinstance(again.usage, Usage)


def test_usage_in_the_trace_survives_a_trace_file(tmp_path):
    from forge.records.trace import read_trace, write_trace

    with ChatServer([reply("sunny") | {"_usage": {"prompt_tokens": 9, "completion_tokens": 1}}]) as server:
        result = AgentLoop([lookup], chat(server), answered).run("weather?")
    write_trace(result.trace, tmp_path / "run.jsonl")
    records = read_trace(tmp_path / "run.jsonl")
    kept = [m["_usage"]["prompt_tokens"] for r in records for m in r.detail.get("messages", ()) if "_usage" in m]
    assert kept == [9]
    assert json.loads((tmp_path / "run.jsonl").read_text().splitlines()[-1])


@pytest.mark.parametrize("definition", ["single_agent", "approval"])
def test_both_shipped_definitions_wait_on_a_question_and_stop_at_the_budget(definition):
    def spending(goal, state):
        state.messages.append({"role": "assistant", "content": None, "_usage": {"prompt_tokens": 10,
                                                                                "completion_tokens": 0}})
        return Intent.call("lookup", city=f"c{len(state.observations)}")

    options = {"definition": definition, "approver": (lambda request: True) if definition == "approval" else None}
    asked = AgentLoop([lookup], ScriptedPolicy([Ask("Which city?")]), answered, **options).run("weather")
    assert (asked.reason, asked.question) == ("input_required", "Which city?")
    spent = AgentLoop([lookup], spending, answered, limits=Limits(token_budget=10), **options).run("weather")
    assert (spent.reason, spent.steps) == ("budget_exhausted", 1)


def test_the_budget_counts_every_turn_of_a_conversation():
    """Turn one asks the user (1,100 tokens); turn two, going on from it, has 400 left of
    its 1,500: its next call costs at least 1,100, so it is not sent."""
    with ChatServer([reply(None, ("c1", "ask_user", {"question": "which city?"})) | {
                         "_usage": {"prompt_tokens": 1000, "completion_tokens": 100}},
                     reply(None, ("c2", "lookup", {"city": "Oslo"})) | {
                         "_usage": {"prompt_tokens": 1200, "completion_tokens": 100}}]) as server:
        loop = AgentLoop([lookup], chat(server), answered, limits=Limits(token_budget=1500))
        first = loop.run("weather?")
        assert first.reason == "input_required"
        second = loop.run("Oslo", state=first.state)
    assert second.reason == "budget_exhausted"
    assert len(server.requests) == 1
    assert (second.usage.total_tokens, second.usage.conversation.total_tokens) == (0, 1100)


def test_result_usage_gives_the_turn_and_the_whole_conversation():
    with ChatServer([reply(None, ("c1", "ask_user", {"question": "which city?"})) | {
                         "_usage": {"prompt_tokens": 100, "completion_tokens": 10}},
                     reply("sunny") | {"_usage": {"prompt_tokens": 130, "completion_tokens": 5}}]) as server:
        loop = AgentLoop([lookup], chat(server), lambda o: o.tool_name == "finish")
        first = loop.run("weather?")
        second = loop.run("Oslo", state=first.state)
    assert (first.usage.total_tokens, second.usage.total_tokens) == (110, 135)
    assert second.usage.conversation.total_tokens == 245 and len(second.usage.conversation.calls) == 2


def test_a_prompt_that_alone_would_pass_the_budget_is_not_sent_when_it_can_be_counted():
    def count_tokens(request):  # a stand-in tokenizer: a token per four characters of the messages
        return len(json.dumps(request["messages"])) // 4

    with ChatServer([reply("never sent")]) as server:
        policy = chat(server, count_tokens=count_tokens)
        result = AgentLoop([lookup], policy, answered, limits=Limits(token_budget=20)).run("weather " * 40)
    assert result.reason == "budget_exhausted" and server.requests == []
    assert result.trace[-1].detail["next_call_at_least"] > 20


def test_a_prompt_that_alone_would_pass_the_budget_is_not_sent_without_a_counter_either():
    """Without count_tokens the prompt is estimated as ContextLimit estimates it (its JSON
    text's length over four): a first prompt over the budget is refused unsent."""
    from forge.models.compaction import size_of

    with ChatServer([reply("never sent")]) as server:
        result = AgentLoop([lookup], chat(server), answered, limits=Limits(token_budget=20)).run("weather " * 40)
    assert result.reason == "budget_exhausted" and server.requests == []
    estimated = result.trace[-1].detail["next_call_at_least"]
    assert estimated > 20
    assert estimated == size_of({"messages": [{"role": "user", "content": "weather " * 40}],
                                 "tools": chat(server).with_tools([lookup])._request([])["tools"]}, None)
