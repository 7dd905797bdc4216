"""One conformance suite for every model policy (issue 51, item 2): each case runs every
policy — `ChatPolicy` over chat completions, `AnthropicPolicy` over the Messages API,
`ResponsesPolicy` over OpenAI's Responses API, `GeminiPolicy` over Gemini's
generateContent — each
with its provider's official SDK against the local server speaking that wire form, under
`run`, `arun`, `stream` and `astream`. What a case reads of a request goes through the
provider's `Wire` (where its form puts a tool call, a tool result, a schema), so a case says
one behaviour once for all of them."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import pytest

from forge import AgentLoop, Limits, tool
from forge.chat_server import ChatServer, reply
from forge.events import RunFinished, TextDelta, ToolCallDelta

pytest.importorskip("openai", reason="the llm extra is a test dependency: python3 tasks.py test installs it")
pytest.importorskip("anthropic", reason="the anthropic extra is a test dependency: python3 tasks.py test installs it")

MODES = ["run", "arun", "stream", "astream"]


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"4 degrees in {city}"


@dataclass
class Forecast:
    city: str
    degrees: int


class ChatWire:
    """What the chat-completions form of a request says."""

    name = "chat"

    @staticmethod
    def policy(server: ChatServer, **options: Any) -> Any:
        import openai

        from forge.models.chat import ChatPolicy

        return ChatPolicy("test-model", client=openai.OpenAI(base_url=server.url, api_key="k", max_retries=0),
                          async_client=openai.AsyncOpenAI(base_url=server.url, api_key="k", max_retries=0), **options)

    @staticmethod
    def calls(request: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
        """The calls of the last assistant turn the request sends back: (id, tool, arguments)."""
        turn = [m for m in request["messages"] if m["role"] == "assistant"][-1]
        return [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in turn["tool_calls"]]

    @staticmethod
    def results(request: dict[str, Any]) -> list[tuple[str, str]]:
        """The tool results the request sends: (call id, content)."""
        return [(m["tool_call_id"], m["content"]) for m in request["messages"] if m["role"] == "tool"]

    @staticmethod
    def system(request: dict[str, Any]) -> str:
        return "\n\n".join(m["content"] for m in request["messages"] if m["role"] == "system")

    @staticmethod
    def tools(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """The tools offered, by name, each with its parameters' schema."""
        return {t["function"]["name"]: t["function"]["parameters"] for t in request.get("tools", ())}

    @staticmethod
    def schema(request: dict[str, Any]) -> dict[str, Any] | None:
        """The typed answer's schema the request asks for, if any."""
        return (request.get("response_format") or {}).get("json_schema", {}).get("schema")

    @staticmethod
    def no_tool_to_call(request: dict[str, Any]) -> bool:
        """Whether the request offers its tools but says none may be called."""
        return bool(request.get("tools")) and request.get("tool_choice") == "none"

    @staticmethod
    def signed(message: dict[str, Any]) -> dict[str, Any]:
        """`message` (a scripted tool call) carrying what this provider needs sent back exactly."""
        message = dict(message)
        message["reasoning_content"] = "I will look it up."
        message["tool_calls"] = [{**message["tool_calls"][0], "extra_content": {"google": {"thought_signature": "c2ln"}}}]
        return message

    @staticmethod
    def sent_back(request: dict[str, Any]) -> Any:
        """What the request sends back of the signed reply."""
        turn = [m for m in request["messages"] if m["role"] == "assistant"][-1]
        return turn["reasoning_content"], turn["tool_calls"][0]["extra_content"]

    expected_back = ("I will look it up.", {"google": {"thought_signature": "c2ln"}})


class MessagesWire:
    """What the Messages form of a request says."""

    name = "anthropic"

    @staticmethod
    def policy(server: ChatServer, **options: Any) -> Any:
        import anthropic

        from forge.models.anthropic import AnthropicPolicy

        return AnthropicPolicy("claude-test", client=anthropic.Anthropic(base_url=server.base, api_key="k", max_retries=0),
                               async_client=anthropic.AsyncAnthropic(base_url=server.base, api_key="k", max_retries=0),
                               **options)

    @staticmethod
    def _blocks(request: dict[str, Any], role: str) -> list[dict[str, Any]]:
        return [b for m in request["messages"] if m["role"] == role for b in m["content"]]

    @staticmethod
    def calls(request: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
        turn = [m for m in request["messages"] if m["role"] == "assistant"][-1]
        return [(b["id"], b["name"], b["input"]) for b in turn["content"] if b["type"] == "tool_use"]

    @classmethod
    def results(cls, request: dict[str, Any]) -> list[tuple[str, str]]:
        return [(b["tool_use_id"], b["content"]) for b in cls._blocks(request, "user") if b["type"] == "tool_result"]

    @staticmethod
    def system(request: dict[str, Any]) -> str:
        return str(request.get("system") or "")

    @staticmethod
    def tools(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {t["name"]: t["input_schema"] for t in request.get("tools", ())}

    @staticmethod
    def schema(request: dict[str, Any]) -> dict[str, Any] | None:
        return (request.get("output_config") or {}).get("format", {}).get("schema")

    @staticmethod
    def no_tool_to_call(request: dict[str, Any]) -> bool:
        return bool(request.get("tools")) and request.get("tool_choice") == {"type": "none"}

    @staticmethod
    def signed(message: dict[str, Any]) -> dict[str, Any]:
        call = message["tool_calls"][0]
        return {**message, "_blocks": [
            {"type": "thinking", "thinking": "I will look it up.", "signature": "c2ln"},
            {"type": "tool_use", "id": call["id"], "name": call["function"]["name"],
             "input": json.loads(call["function"]["arguments"]), "caller": {"type": "direct"}}]}

    @staticmethod
    def sent_back(request: dict[str, Any]) -> Any:
        turn = [m for m in request["messages"] if m["role"] == "assistant"][-1]
        return tuple(turn["content"])

    expected_back = ({"type": "thinking", "thinking": "I will look it up.", "signature": "c2ln"},
                     {"type": "tool_use", "id": "call_1", "name": "weather", "input": {"city": "Oslo"},
                      "caller": {"type": "direct"}})


class ResponsesWire:
    """What the Responses form of a request says."""

    name = "responses"

    @staticmethod
    def policy(server: ChatServer, **options: Any) -> Any:
        import openai

        from forge.models.responses import ResponsesPolicy

        return ResponsesPolicy("test-model", client=openai.OpenAI(base_url=server.url, api_key="k", max_retries=0),
                               async_client=openai.AsyncOpenAI(base_url=server.url, api_key="k", max_retries=0),
                               **options)

    @staticmethod
    def calls(request: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
        last_user = max(n for n, i in enumerate(request["input"]) if i.get("role") == "user")
        return [(i["call_id"], i["name"], json.loads(i["arguments"])) for i in request["input"][last_user:]
                if i.get("type") == "function_call"]

    @staticmethod
    def results(request: dict[str, Any]) -> list[tuple[str, str]]:
        return [(i["call_id"], i["output"]) for i in request["input"] if i.get("type") == "function_call_output"]

    @staticmethod
    def system(request: dict[str, Any]) -> str:
        return str(request.get("instructions") or "")

    @staticmethod
    def tools(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {t["name"]: t["parameters"] for t in request.get("tools", ())}

    @staticmethod
    def schema(request: dict[str, Any]) -> dict[str, Any] | None:
        return ((request.get("text") or {}).get("format") or {}).get("schema")

    @staticmethod
    def no_tool_to_call(request: dict[str, Any]) -> bool:
        return bool(request.get("tools")) and request.get("tool_choice") == "none"

    @staticmethod
    def signed(message: dict[str, Any]) -> dict[str, Any]:
        call = message["tool_calls"][0]
        return {**message, "_items": [
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "c2ln"},
            {"type": "function_call", "id": "fc_1", "call_id": call["id"], "name": call["function"]["name"],
             "arguments": call["function"]["arguments"], "status": "completed"}]}

    @staticmethod
    def sent_back(request: dict[str, Any]) -> Any:
        return tuple(i for i in request["input"] if i.get("type") in ("reasoning", "function_call"))

    expected_back = ({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "c2ln"},
                     {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather",
                      "arguments": '{"city": "Oslo"}', "status": "completed"})


class GeminiWire:
    """What the generateContent form of a request says (as the SDK sends it: camelCase)."""

    name = "gemini"

    @staticmethod
    def policy(server: ChatServer, **options: Any) -> Any:
        from google import genai

        from forge.models.gemini import GeminiPolicy

        return GeminiPolicy("gemini-test", client=genai.Client(api_key="k", http_options={"base_url": server.base}),
                            **options)

    @staticmethod
    def calls(request: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
        turn = [c for c in request["contents"] if c["role"] == "model"][-1]
        return [(p["functionCall"].get("id"), p["functionCall"]["name"], p["functionCall"]["args"])
                for p in turn["parts"] if "functionCall" in p]

    @staticmethod
    def results(request: dict[str, Any]) -> list[tuple[str, str]]:
        return [(p["functionResponse"].get("id"), p["functionResponse"]["response"]["result"])
                for c in request["contents"] for p in c["parts"] if "functionResponse" in p]

    @staticmethod
    def system(request: dict[str, Any]) -> str:
        return "".join(p.get("text", "") for p in (request.get("systemInstruction") or {}).get("parts", ()))

    @staticmethod
    def tools(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {d["name"]: d["parameters_json_schema"] for t in request.get("tools", ())
                for d in t["functionDeclarations"]}

    @staticmethod
    def schema(request: dict[str, Any]) -> dict[str, Any] | None:
        return (request.get("generationConfig") or {}).get("responseJsonSchema")

    @staticmethod
    def no_tool_to_call(request: dict[str, Any]) -> bool:
        return bool(request.get("tools")) and request.get("toolConfig") == {"functionCallingConfig": {"mode": "NONE"}}

    @staticmethod
    def signed(message: dict[str, Any]) -> dict[str, Any]:
        call = message["tool_calls"][0]
        return {**message, "_parts": [
            {"thought": True, "text": "I will look it up."},
            {"functionCall": {"id": call["id"], "name": call["function"]["name"],
                              "args": json.loads(call["function"]["arguments"])}, "thoughtSignature": "c2ln"}]}

    @staticmethod
    def sent_back(request: dict[str, Any]) -> Any:
        return tuple([c for c in request["contents"] if c["role"] == "model"][-1]["parts"])

    expected_back = ({"thought": True, "text": "I will look it up."},
                     {"functionCall": {"id": "call_1", "name": "weather", "args": {"city": "Oslo"}},
                      "thoughtSignature": "c2ln"})


WIRES = (ChatWire, MessagesWire, ResponsesWire, GeminiWire)


def pytest_generate_tests(metafunc):
    """Every case runs every policy; a case taken `mode` by mode runs each policy in every
    mode under `--full-trials` (CI), and in the default run each policy in one mode, a
    different one per policy and turning with the case, so that every mode of every policy
    is still met across the suite (the whole grid is 96 cases of ~0.6 s, each a real server
    and SDK client)."""
    if "wire" not in metafunc.fixturenames:
        return
    if "mode" not in metafunc.fixturenames:
        metafunc.parametrize("wire", WIRES, ids=[wire.name for wire in WIRES])
        return
    if metafunc.config.getoption("full_trials"):
        pairs = [(wire, mode) for wire in WIRES for mode in MODES]
    else:
        turn = sum(map(ord, metafunc.function.__name__)) % len(MODES)
        pairs = [(wire, MODES[(number + turn) % len(MODES)]) for number, wire in enumerate(WIRES)]
    metafunc.parametrize(("wire", "mode"), pairs, ids=[f"{wire.name}-{mode}" for wire, mode in pairs])


def ran(loop: AgentLoop, goal: str, mode: str, **options: Any) -> tuple[Any, list[Any]]:
    """The result of `loop` on `goal` run as `mode` says, and the events a stream gave."""
    if mode == "run":
        return loop.run(goal, **options), []
    if mode == "arun":
        return asyncio.run(loop.arun(goal, **options)), []
    if mode == "stream":
        events = list(loop.stream(goal, **options))
    else:
        async def gathered() -> list[Any]:
            return [event async for event in loop.astream(goal, **options)]
        events = asyncio.run(gathered())
    finished = [event for event in events if isinstance(event, RunFinished)]
    return finished[-1].result, events


def agent(wire: Any, server: ChatServer, tools: Any = (weather,), **options: Any) -> AgentLoop:
    policy_options = {key: options.pop(key) for key in ("system",) if key in options}
    return AgentLoop(list(tools), wire.policy(server, **policy_options), lambda o: o.tool_name == "finish", **options)


OSLO = reply(None, ("call_1", "weather", {"city": "Oslo"}))


def test_a_tool_call_is_a_step_whose_result_goes_back_paired_with_its_id(wire, mode):
    with ChatServer([OSLO, reply("It is 4 degrees.")]) as server:
        result, _ = ran(agent(wire, server, system="Be brief."), "weather in Oslo?", mode)
    assert (result.reason, result.answer) == ("verified_success", "It is 4 degrees.")
    first, second = server.requests
    assert wire.system(first) == "Be brief." and set(wire.tools(first)) == {"weather", "ask_user"}
    assert wire.tools(first)["weather"] == weather.schema
    assert wire.calls(second) == [("call_1", "weather", {"city": "Oslo"})]
    assert wire.results(second) == [("call_1", "4 degrees in Oslo")]


def test_calls_asked_at_once_are_made_and_each_result_goes_back_to_its_call(wire, mode):
    both = reply(None, ("call_1", "weather", {"city": "Oslo"}), ("call_2", "weather", {"city": "Rome"}))
    with ChatServer([both, reply("Cold and warm.")]) as server:
        result, _ = ran(agent(wire, server), "weather in Oslo and Rome?", mode)
    assert [o.payload for o in result.state.observations[:2]] == ["4 degrees in Oslo", "4 degrees in Rome"]
    assert sorted(wire.results(server.requests[1])) == [("call_1", "4 degrees in Oslo"), ("call_2", "4 degrees in Rome")]


def test_a_typed_answer_is_asked_for_with_its_schema_and_read_into_its_shape(wire, mode):
    with ChatServer([reply('{"city": "Oslo", "degrees": 4}')]) as server:
        result, _ = ran(agent(wire, server, output=Forecast), "forecast for Oslo", mode)
    assert result.answer == Forecast("Oslo", 4)
    assert wire.schema(server.requests[0])["required"] == ["city", "degrees"]


def test_a_question_for_the_user_ends_the_turn_and_the_reply_goes_back_as_its_result(wire):
    asked = reply(None, ("call_q", "ask_user", {"question": "Which city?"}))
    with ChatServer([asked, reply("It is 4 degrees in Oslo.")]) as server:
        loop = agent(wire, server)
        first = loop.run("what is the weather?")
        assert (first.reason, first.question) == ("input_required", "Which city?")
        second = loop.run("Oslo", state=first.state)
    assert second.answer == "It is 4 degrees in Oslo."
    assert wire.results(server.requests[1]) == [("call_q", "Oslo")]


def test_usage_counts_each_calls_tokens_cached_ones_too(wire, mode):
    counted = {**reply("Done."), "_usage": {"prompt_tokens": 120, "completion_tokens": 7,
                                           "prompt_tokens_details": {"cached_tokens": 100}}}
    with ChatServer([counted]) as server:
        result, _ = ran(agent(wire, server), "anything", mode)
    usage = result.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens) == (120, 7, 100)


def test_what_the_provider_needs_back_goes_back_exactly_and_a_replay_sends_the_same(wire, mode):
    with ChatServer([wire.signed(OSLO), reply("It is 4 degrees.")]) as server:
        loop = agent(wire, server)
        result, _ = ran(loop, "weather in Oslo?", mode)
    assert wire.sent_back(server.requests[1]) == wire.expected_back
    again = loop.replay(result.journal)  # answered from the journal: no server, same requests
    assert (again.trace, again.answer) == (result.trace, result.answer)


def test_a_replay_with_another_system_prompt_fails_naming_what_changed(wire):
    from forge.records.journal import JournalMiss

    with ChatServer([reply("Done.")]) as server:
        result = agent(wire, server, system="Be brief.").run("anything")
        changed = agent(wire, server, system="Be thorough.")
    with pytest.raises(JournalMiss, match="system|messages|instructions"):
        changed.replay(result.journal)


def test_a_request_that_would_pass_the_token_budget_is_not_sent(wire):
    costly = {**OSLO, "_usage": {"prompt_tokens": 900, "completion_tokens": 90}}
    with ChatServer([costly, reply("never sent")]) as server:
        result = agent(wire, server, limits=Limits(token_budget=1000)).run("weather in Oslo?")
    assert result.reason == "budget_exhausted" and len(server.requests) == 1


@pytest.mark.parametrize("streamed", ["stream", "astream"])
def test_a_streamed_reply_comes_as_deltas_that_make_up_the_reply(wire, streamed):
    with ChatServer([OSLO, reply("It is 4 degrees in Oslo.")]) as server:
        result, events = ran(agent(wire, server), "weather in Oslo?", streamed)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "It is 4 degrees in Oslo."
    calls = [e for e in events if isinstance(e, ToolCallDelta)]
    assert (calls[0].call_id, calls[0].name) == ("call_1", "weather")
    assert json.loads("".join(e.arguments for e in calls)) == {"city": "Oslo"}
    assert result.answer == "It is 4 degrees in Oslo."


def test_an_endpoint_that_fails_ends_the_run_in_fatal_error_with_the_providers_error(wire):
    with ChatServer([{"role": "assistant", "content": "overloaded", "_status": 500}]) as server:
        result = agent(wire, server).run("anything")
    assert result.reason == "fatal_error" and "overloaded" in str(result.error)


def test_a_cassette_written_and_read_back_sends_the_providers_own_parts_again(wire, tmp_path):
    from forge.machine.cassette import write_cassette

    with ChatServer([wire.signed(OSLO), reply("It is 4 degrees.")]) as server:
        loop = agent(wire, server)
        result = loop.run("weather in Oslo?")
    cassette = write_cassette(tmp_path / "weather.jsonl", result)
    again = loop.replay(cassette)  # the server is gone: every request answered from the file, and checked
    moves = [(record.source, record.trigger, record.dest) for record in result.trace]
    assert ([(record.source, record.trigger, record.dest) for record in again.trace], again.answer) == \
        (moves, result.answer)  # (a cassette keeps no timing)
    assert wire.sent_back(server.requests[1]) == wire.expected_back  # what the replay's requests were checked against
    assert "c2ln" in cassette.read_text()


def test_a_run_out_of_budget_wraps_up_with_one_call_that_may_call_no_tool(wire, mode):
    """`with_wrap_up`: the token budget is spent; the policy is asked once more, its tools
    offered but not to be called, and its text is the run's wrap-up; the run still ends in
    budget_exhausted."""
    from forge.machine.loader import load_definition

    costly = {**OSLO, "_usage": {"prompt_tokens": 900, "completion_tokens": 90}}
    with ChatServer([costly, reply("Oslo: 4 degrees; Rome not checked.")]) as server:
        loop = agent(wire, server, limits=Limits(token_budget=1000),
                     definition=load_definition("single_agent").with_wrap_up())
        result, _ = ran(loop, "weather in Oslo and Rome?", mode)
    assert (result.reason, result.wrap_up, result.answer) == \
        ("budget_exhausted", "Oslo: 4 degrees; Rome not checked.", None)
    assert [record.dest for record in result.trace][-2:] == ["wrap_up", "budget_exhausted"]
    last = server.requests[-1]
    assert wire.results(last) == [("call_1", "4 degrees in Oslo")]
    assert wire.no_tool_to_call(last)


def test_each_tool_attempt_and_its_choice_carry_the_models_call_id(wire):
    from forge.events import ToolAttemptFinished

    both = reply(None, ("call_1", "weather", {"city": "Oslo"}), ("call_2", "weather", {"city": "Rome"}))
    with ChatServer([OSLO, both, reply("Done.")]) as server:
        result, events = ran(agent(wire, server), "weather?", "stream")
    assert [e.attempt.call_id for e in events if isinstance(e, ToolAttemptFinished)] == ["call_1", "call_1", "call_2"]
    chosen = [record.detail for record in result.trace if record.source == "select" and record.trigger == "choose"]
    assert chosen[0]["call_id"] == "call_1" and chosen[1]["call_ids"] == ["call_1", "call_2"]
