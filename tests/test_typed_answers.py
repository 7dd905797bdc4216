"""Typed answers (issue 33, item 4): `AgentLoop(..., output=Shape)` validates the final answer
before `verify`, makes `result.answer` the typed value, tells an invalid answer to the
policy, which replans within the step budget on a definition edge of its own
(`answer_invalid`); `ChatPolicy` asks the model for the shape, as structured output or
with a `final_answer` tool. Against the local chat server, sync and async."""

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path

import pydantic
import pytest
from chat_server import ChatServer, reply
from models import chat_policy, llm

from forge import AgentLoop, Finish, Limits, ScriptedPolicy, tool
from forge.check import check_definition
from forge.diagram import diagram_text
from forge.errors import UsageError
from forge.machine.loader import load_definition
from forge.output import AnswerInvalid, Output

FINAL_ANSWER = "final_answer"
"""The tool `ChatPolicy` offers a model for its typed answer (`forge.models.chat.FINAL_ANSWER`; a test pins it)."""


@dataclass
class Weather:
    """The weather in a city."""

    city: str
    celsius: float


class Forecast(pydantic.BaseModel):
    city: str
    days: list[int]


@tool
def temperature(city: str) -> float:
    """The temperature in a city, in degrees Celsius."""
    return 4.5


def _loop(answers, output=Weather, verify=lambda o: True, **more):
    return AgentLoop([temperature], ScriptedPolicy(answers), verify, output=output, **more)


def test_a_valid_answer_is_the_typed_value():
    result = _loop([Finish({"city": "Oslo", "celsius": 4.5})]).run("weather in Oslo")
    assert result.reason == "verified_success"
    assert result.answer == Weather("Oslo", 4.5) and isinstance(result.answer, Weather)


def test_an_answer_given_as_json_text_is_read_then_validated():
    result = _loop([Finish('{"city": "Oslo", "celsius": "4.5"}')]).run("weather in Oslo")
    assert result.answer == Weather("Oslo", 4.5)


def test_an_invalid_answer_takes_its_own_edge_is_told_and_the_policy_replans():
    result = _loop([Finish({"city": "Oslo"}), Finish({"city": "Oslo", "celsius": 4.5})]).run("weather in Oslo")
    assert result.reason == "verified_success" and result.answer == Weather("Oslo", 4.5)
    first = result.trace[0]
    assert (first.source, first.trigger, first.dest, first.verdict) == ("select", "finish", "observe", "answer_invalid")
    assert "celsius: Field required" in first.detail["answer_invalid"]
    invalid = result.state.observations[0]
    assert invalid.tool_name == "finish" and invalid.status == "retryable_error"
    assert isinstance(invalid.payload, AnswerInvalid)
    assert [(v.path, v.message) for v in invalid.payload.violations] == [("celsius", "Field required")]
    assert invalid.payload.answer == {"city": "Oslo"}


def test_verify_sees_the_typed_answer_and_never_an_invalid_one():
    seen = []
    result = _loop([Finish({"city": 3}), Finish({"city": "Oslo", "celsius": 1})],
                   verify=lambda o: seen.append(o.answer) or True).run("weather")
    assert seen == [Weather("Oslo", 1.0)] and result.reason == "verified_success"


def test_the_same_invalid_answer_again_and_again_ends_as_a_repeated_action():
    result = _loop([Finish({"city": "Oslo"})] * 3, limits=Limits(repeat_limit=2)).run("weather")
    assert result.reason == "repeated_action"
    assert [o.status for o in result.state.observations] == ["retryable_error"] * 2


def test_different_invalid_answers_are_bounded_by_the_step_budget():
    result = _loop([Finish({"city": str(n)}) for n in range(5)], max_steps=3).run("weather")
    assert result.reason == "step_budget_exhausted" and len(result.state.observations) == 3


def test_a_pydantic_model_is_an_output():
    result = _loop([Finish({"city": "Oslo", "days": ["1", 2]})], output=Forecast).run("forecast")
    assert result.answer == Forecast(city="Oslo", days=[1, 2])


def test_a_json_schema_is_an_output_and_its_answer_is_the_json_value():
    schema = {"title": "Pick", "type": "object", "properties": {"choice": {"enum": ["a", "b"]}},
              "required": ["choice"]}
    result = _loop([Finish({"choice": "c"}), Finish({"choice": "b"})], output=schema).run("pick")
    assert result.answer == {"choice": "b"}
    refused = result.state.observations[0].payload
    assert refused.violations[0].path == "choice" and "is not one of" in refused.violations[0].message


def test_a_shape_that_is_not_an_object_is_an_output():
    result = _loop([Finish(["a", 1]), Finish(["a", "b"])], output=list[str]).run("names")
    assert result.answer == ["a", "b"]
    assert [v.path for v in result.state.observations[0].payload.violations] == ["[1]"]


def test_output_that_is_no_shape_is_refused_naming_it():
    with pytest.raises(UsageError, match="output must be a pydantic model, a dataclass, a type or a JSON Schema"):
        _loop([Finish(1)], output=42)


def test_a_json_schema_that_is_not_valid_is_refused_saying_where():
    with pytest.raises(UsageError, match="output: its schema is not valid JSON Schema"):
        _loop([Finish(1)], output={"type": "no-such-type"})


def test_a_definition_without_an_answer_invalid_edge_refuses_an_output(tmp_path):
    text = Path(load_definition("single_agent").path).read_text().replace(
        '[[transitions]]\nsource = "select"\ntrigger = "finish"\ndest = "observe"\nguard = "answer_invalid"\n', "")
    path = tmp_path / "untyped.toml"
    path.write_text(text)
    assert AgentLoop([temperature], ScriptedPolicy([Finish(1)]), lambda o: True, definition=path).run("x").answer == 1
    with pytest.raises(UsageError, match="has no answer_invalid edge"):
        AgentLoop([temperature], ScriptedPolicy([Finish(1)]), lambda o: True, definition=path, output=Weather)


def test_a_loop_without_output_takes_any_answer_as_it_is():
    result = AgentLoop([temperature], ScriptedPolicy([Finish({"anything": 1})]), lambda o: True).run("x")
    assert result.answer == {"anything": 1} and result.trace[0].verdict == "finished"


@pytest.mark.parametrize("name", ["single_agent", "approval"])
def test_the_edge_is_drawn_and_checked(name):
    assert "answer_invalid" in diagram_text(name, "dot") and "answer_invalid" in diagram_text(name, "mermaid")
    report = check_definition(name)
    assert not report.findings and report.boundedness is not None and report.boundedness.bound is not None


def test_a_replay_of_a_typed_run_gives_the_same_typed_answer_calling_nothing():
    loop = _loop([Finish({"city": "Oslo"}), Finish({"city": "Oslo", "celsius": 4.5})])
    result = loop.run("weather")
    again = _loop([]).replay(result.journal)
    assert again.answer == Weather("Oslo", 4.5) and [r.verdict for r in again.trace] == [r.verdict for r in result.trace]


# ChatPolicy against the local chat server


def _policy(server, **more):
    return chat_policy(server, **more)


def test_the_final_answer_tool_is_named_as_these_tests_name_it():
    assert llm().FINAL_ANSWER == FINAL_ANSWER


def _chat_loop(server, **more):
    return AgentLoop([temperature], _policy(server, **more), lambda o: o.answer is not None, output=Weather)


def _structured_script():
    return [reply(None, ("call_1", "temperature", {"city": "Oslo"})),
            reply(json.dumps({"city": "Oslo"})),
            reply(json.dumps({"city": "Oslo", "celsius": 4.5}))]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_chat_policy_asks_for_structured_output_and_corrects_an_invalid_answer(mode):
    with ChatServer(_structured_script()) as server:
        loop = _chat_loop(server)
        result = loop.run("weather in Oslo") if mode == "sync" else asyncio.run(loop.arun("weather in Oslo"))
    assert result.reason == "verified_success" and result.answer == Weather("Oslo", 4.5)
    first = server.requests[0]
    assert first["response_format"]["type"] == "json_schema"
    sent = first["response_format"]["json_schema"]
    assert sent["name"] == "Weather" and sent["schema"]["required"] == ["city", "celsius"]
    told = server.requests[2]["messages"][-1]
    assert told["role"] == "user" and "celsius: Field required" in told["content"]
    assert "in the shape asked for" in told["content"]


def test_a_structured_answer_that_is_not_json_is_told_to_the_model():
    with ChatServer([reply("It is 4.5 degrees"), reply(json.dumps({"city": "Oslo", "celsius": 4.5}))]) as server:
        result = _chat_loop(server).run("weather in Oslo")
    assert result.answer == Weather("Oslo", 4.5)
    assert "is not a valid Weather" in server.requests[1]["messages"][-1]["content"]


def test_a_shape_that_is_not_an_object_is_asked_wrapped_and_unwrapped():
    with ChatServer([reply(json.dumps({"answer": ["Oslo", "Bergen"]}))]) as server:
        loop = AgentLoop([temperature], _policy(server), lambda o: True, output=list[str])
        result = loop.run("two cities")
    assert result.answer == ["Oslo", "Bergen"]
    schema = server.requests[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["answer"] == {"type": "array", "items": {"type": "string"}}


def _tool_script():
    return [reply(None, ("call_1", FINAL_ANSWER, {"city": "Oslo", "celsius": "warm"})),
            reply(None, ("call_2", FINAL_ANSWER, {"city": "Oslo", "celsius": 4.5})),
            reply("It is still 4.5 degrees.")]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_without_structured_output_the_answer_is_a_final_answer_call(mode):
    with ChatServer(_tool_script()) as server:
        loop = _chat_loop(server, structured_output=False)
        result = loop.run("weather in Oslo") if mode == "sync" else asyncio.run(loop.arun("weather in Oslo"))
    assert result.answer == Weather("Oslo", 4.5)
    first = server.requests[0]
    assert "response_format" not in first
    offered = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert offered[FINAL_ANSWER]["parameters"]["required"] == ["city", "celsius"]
    told = server.requests[1]["messages"][-1]
    assert told == {"role": "tool", "tool_call_id": "call_1", "content": told["content"]}
    assert "celsius: Input should be a valid number" in told["content"]


def test_a_conversation_goes_on_after_a_final_answer_call():
    with ChatServer([*_tool_script()[1:2], reply(None, ("call_3", FINAL_ANSWER, {"city": "Bergen", "celsius": 7}))]
                    ) as server:
        loop = _chat_loop(server, structured_output=False)
        first = loop.run("weather in Oslo")
        second = loop.run("and Bergen?", state=first.state)
    assert second.answer == Weather("Bergen", 7.0)
    sent = server.requests[1]["messages"]
    assert sent[-2] == {"role": "tool", "tool_call_id": "call_2", "content": "Answer received."}
    assert sent[-1] == {"role": "user", "content": "and Bergen?"}


def test_a_tool_named_final_answer_is_refused_when_the_answer_is_asked_with_one():
    @tool
    def final_answer(text: str) -> str:
        """A tool that takes the name."""
        return text

    policy = llm().ChatPolicy("m", client=object(), structured_output=False)
    with pytest.raises(UsageError, match="a tool is named 'final_answer'"):
        AgentLoop([final_answer], policy, lambda o: True, output=Weather)


def test_a_typed_chat_run_replays_from_its_journal_calling_nothing():
    with ChatServer(_structured_script()) as server:
        result = _chat_loop(server).run("weather in Oslo")
        asked = len(server.requests)
        again = _chat_loop(server).replay(result.journal)
        assert len(server.requests) == asked
    assert again.answer == result.answer == Weather("Oslo", 4.5)


def test_an_output_made_by_hand_checks_with_its_own_function():
    def even(answer):
        if answer % 2:
            raise AnswerInvalid("even number", answer, ())
        return answer

    shape = Output("even", {"type": "integer", "multipleOf": 2}, True, even)
    result = _loop([Finish(3), Finish(4)], output=shape).run("an even number")
    assert result.answer == 4 and "the answer is not a valid even number" in str(result.state.observations[0].payload)


def test_a_streamed_typed_run_gives_the_typed_answer_and_the_same_journal():
    from forge.events import RunFinished, TextDelta

    with ChatServer(_structured_script()) as other:
        plain = _chat_loop(other).run("weather in Oslo")
    with ChatServer(_structured_script()) as server:
        events = list(_chat_loop(server).stream("weather in Oslo"))
    assert all(request["response_format"]["json_schema"]["name"] == "Weather" for request in server.requests)
    streamed = events[-1].result
    assert isinstance(events[-1], RunFinished) and streamed.answer == Weather("Oslo", 4.5) == plain.answer
    assert "".join(e.text for e in events if isinstance(e, TextDelta)).startswith('{"city":')
    assert [(e.kind, e.identity) for e in streamed.journal] == [(e.kind, e.identity) for e in plain.journal]


def _nested(depth):
    value: dict = {}
    inner = value
    for _ in range(depth):
        inner["x"] = {}
        inner = inner["x"]
    return value


def test_an_answer_nested_too_deep_is_told_as_invalid_and_the_policy_replans():
    result = _loop([Finish({"city": _nested(100_000), "celsius": 1}), Finish({"city": "Oslo", "celsius": 1})]).run("w")
    assert result.reason == "verified_success" and result.answer == Weather("Oslo", 1.0)
    invalid = result.state.observations[0].payload
    assert isinstance(invalid, AnswerInvalid)
    assert [(v.path, v.message) for v in invalid.violations] == [("(answer)", "nested deeper than 100 levels")]


def test_an_answer_as_json_text_nested_too_deep_is_told_as_invalid():
    deep = "[" * 100_000 + "]" * 100_000
    result = _loop([Finish(deep), Finish({"city": "Oslo", "celsius": 1})]).run("w")
    assert result.reason == "verified_success"
    assert "nested deeper than 100 levels" in str(result.state.observations[0].payload)


def test_a_models_tool_arguments_nested_too_deep_are_told_to_it_as_an_error():
    deep = '{"city": ' + "[" * 100_000 + "]" * 100_000 + "}"
    replies = [reply(None, ("c1", "temperature", deep)), reply(None, ("c2", "temperature", '{"city": "Oslo"}')),
               reply('{"city": "Oslo", "celsius": 4.5}')]
    with ChatServer(replies) as server:
        model = chat_policy(server, "m")
        result = AgentLoop([temperature], model, lambda o: o.tool_name == "finish", output=Weather).run("weather")
        told = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert result.reason == "verified_success" and result.answer == Weather("Oslo", 4.5)
    assert told == ["error: the arguments refused: nested deeper than 100 levels"]


def test_distinct_invalid_answers_are_bounded_by_the_step_budget_not_the_repeat_limit():
    """Each answer is another invalid one: no answer repeats, so the repeat limit (2) never
    stops the run; the step budget (5, above it) does, after five answers."""
    result = _loop([Finish({"city": str(n)}) for n in range(9)], max_steps=5, limits=Limits(repeat_limit=2)).run("w")
    assert result.reason == "step_budget_exhausted" and len(result.state.observations) == 5
    assert [o.status for o in result.state.observations] == ["retryable_error"] * 5
