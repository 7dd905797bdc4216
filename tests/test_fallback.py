"""Fallbacks between models (issue 51, item 3): a call the first model fails for a passing
reason (a 5xx, a 429, a timeout, no connection) is asked of the next model; the journal
keeps one model call whose reply says which model answered; a replay answers it from the
journal; a failure that is not passing is not tried elsewhere."""

import asyncio

import openai
import pytest

from forge import AgentLoop, Finish, UsageError, tool
from forge.chat_server import ChatServer, reply
from forge.models.chat import ChatPolicy
from forge.models.fallback import FallbackPolicy


@tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    return "4 °C, rain"


def chat(name, server, retries=0):
    return ChatPolicy(name, client=openai.OpenAI(base_url=server.url, api_key="unused", max_retries=retries))


def loop_of(policy):
    return AgentLoop([weather], policy, verify=lambda observation: isinstance(observation.payload, Finish))


def failing(status):
    return {"role": "assistant", "content": f"the primary is down ({status})", "_status": status}


@pytest.mark.parametrize("status", [500, 503, 429])
def test_a_call_the_first_model_fails_for_a_passing_reason_is_answered_by_the_next(status):
    with ChatServer([failing(status)]) as primary, ChatServer([reply("Rain in Oslo.")]) as backup:
        result = loop_of(FallbackPolicy([chat("big-model", primary), chat("small-model", backup)])).run("Oslo?")
    assert (result.reason, result.answer) == ("verified_success", "Rain in Oslo.")
    assert [request["model"] for request in primary.requests + backup.requests] == ["big-model", "small-model"]
    (call,) = [entry for entry in result.journal if entry.kind == "model"]
    assert call.value["usage"]["request_model"] == "small-model"  # the journal says which model answered
    assert [each.request_model for each in result.usage.calls] == ["small-model"]


def slowly(body):
    import time

    time.sleep(2.0)
    return reply("late")


def test_a_call_past_its_timeout_is_asked_of_the_next_model():
    with ChatServer(slowly) as slow, ChatServer([reply("Rain.")]) as backup:
        result = loop_of(FallbackPolicy([chat("slow-model", slow), chat("fast-model", backup)], timeout=0.5)).run("?")
    assert result.answer == "Rain." and backup.requests[0]["model"] == "fast-model"


def test_a_failure_that_is_not_passing_is_not_tried_elsewhere():
    with ChatServer([failing(400)]) as primary, ChatServer([reply("never")]) as backup:
        result = loop_of(FallbackPolicy([chat("big-model", primary), chat("small-model", backup)])).run("Oslo?")
    assert result.reason == "fatal_error" and isinstance(result.error, openai.BadRequestError)
    assert backup.requests == []


def test_when_every_model_fails_the_last_ones_error_ends_the_run():
    with ChatServer([failing(500)]) as first, ChatServer([failing(503)]) as second:
        result = loop_of(FallbackPolicy([chat("a", first), chat("b", second)])).run("?")
    assert result.reason == "fatal_error" and "503" in str(result.error)


def test_a_call_that_succeeds_at_once_asks_only_the_first_model():
    with ChatServer([reply("Rain.")]) as primary, ChatServer([]) as backup:
        result = loop_of(FallbackPolicy([chat("a", primary), chat("b", backup)])).run("?")
    assert result.answer == "Rain." and backup.requests == []


def test_a_replay_answers_the_fallen_back_call_from_the_journal(tmp_path):
    from forge import write_trace

    with ChatServer([failing(500)]) as primary, ChatServer([reply("Rain in Oslo.")]) as backup:
        loop = loop_of(FallbackPolicy([chat("big-model", primary), chat("small-model", backup)]))
        result = loop.run("Oslo?")
    write_trace(result.trace, tmp_path / "run.jsonl", journal=result.journal)
    replayed = loop.replay(tmp_path / "run.jsonl")  # both servers gone: nothing is asked
    assert (replayed.trace, replayed.answer) == (result.trace, "Rain in Oslo.")


def test_fallbacks_work_under_arun():
    async def run():
        with ChatServer([failing(502)]) as primary, ChatServer([reply("Rain.")]) as backup:
            return await loop_of(FallbackPolicy([chat("a", primary), chat("b", backup)])).arun("?")

    assert asyncio.run(run()).answer == "Rain."


@pytest.mark.parametrize(("models", "more", "said"), [
    (["one"], {}, "give two or more, got 1"),
    (["not", "policies"], {}, "model policies"),
    (None, {"timeout": 0}, "seconds above 0"),
])
def test_a_bad_fallback_is_refused_naming_what_is_wrong(models, more, said):
    given = models if models is not None else [ChatPolicy("a"), ChatPolicy("b")]
    with pytest.raises(UsageError, match=said):
        FallbackPolicy(given, **more)


def claude(name, server):
    import anthropic

    from forge.models.anthropic import AnthropicPolicy

    return AnthropicPolicy(name, client=anthropic.Anthropic(base_url=server.base, api_key="unused", max_retries=0),
                           system="Be brief.")


def test_claude_down_is_stood_in_for_by_an_openai_model_sent_the_conversation_in_its_own_form():
    pytest.importorskip("anthropic", reason="the anthropic extra is a test dependency")
    script = [reply(None, ("toolu_1", "weather", {"city": "Oslo"})), failing(529)]
    with ChatServer(script) as primary, ChatServer([reply("Rain in Oslo.")]) as backup:
        result = loop_of(FallbackPolicy([claude("claude-big", primary), chat("gpt-small", backup)])).run("Oslo?")
    assert result.answer == "Rain in Oslo."
    (sent,) = backup.requests
    assert sent["model"] == "gpt-small" and "max_tokens" not in sent
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Oslo?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "toolu_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "4 °C, rain"}]
    assert [tool["function"]["name"] for tool in sent["tools"]] == ["weather", "ask_user"]


def test_an_openai_model_down_is_stood_in_for_by_claude_sent_the_messages_form():
    pytest.importorskip("anthropic", reason="the anthropic extra is a test dependency")
    with ChatServer([failing(503)]) as primary, ChatServer([reply("Rain in Oslo.")]) as backup:
        result = asyncio.run(loop_of(FallbackPolicy([chat("gpt-big", primary), claude("claude-small", backup)]))
                             .arun("Oslo?"))
    assert result.answer == "Rain in Oslo."
    (sent,) = backup.requests
    assert (sent["model"], sent["max_tokens"], sent["messages"]) == \
        ("claude-small", 4096, [{"role": "user", "content": [{"type": "text", "text": "Oslo?"}]}])
    assert [tool["name"] for tool in sent["tools"]] == ["weather", "ask_user"]


def test_a_responses_model_stands_in_for_claude_with_the_conversation_as_input_items():
    pytest.importorskip("anthropic", reason="the anthropic extra is a test dependency")
    from forge.models.responses import ResponsesPolicy

    backup_policy = lambda server: ResponsesPolicy(  # noqa: E731
        "gpt-small", client=openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0))
    script = [reply(None, ("toolu_1", "weather", {"city": "Oslo"})), failing(500)]
    with ChatServer(script) as primary, ChatServer([reply("Rain in Oslo.")]) as backup:
        result = loop_of(FallbackPolicy([claude("claude-big", primary), backup_policy(backup)])).run("Oslo?")
    assert result.answer == "Rain in Oslo."
    (sent,) = backup.requests
    assert (sent["model"], sent["instructions"]) == ("gpt-small", "Be brief.")
    assert sent["input"] == [
        {"role": "user", "content": "Oslo?"},
        {"type": "function_call", "call_id": "toolu_1", "name": "weather", "arguments": '{"city": "Oslo"}'},
        {"type": "function_call_output", "call_id": "toolu_1", "output": "4 °C, rain"}]


def test_an_openai_model_stands_in_for_gemini_with_its_calls_and_results_paired():
    genai = pytest.importorskip("google.genai", reason="the gemini extra is a test dependency")
    from forge.models.gemini import GeminiPolicy

    gemini = lambda server: GeminiPolicy(  # noqa: E731
        "gemini-big", client=genai.Client(api_key="unused", http_options={"base_url": server.base}), system="Be brief.")
    script = [reply(None, ("call_9", "weather", {"city": "Oslo"})), failing(503)]
    with ChatServer(script) as primary, ChatServer([reply("Rain in Oslo.")]) as backup:
        result = loop_of(FallbackPolicy([gemini(primary), chat("gpt-small", backup)])).run("Oslo?")
    assert result.answer == "Rain in Oslo."
    (sent,) = backup.requests
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Oslo?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_9", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}]},
        {"role": "tool", "tool_call_id": "call_9", "content": "4 °C, rain"}]


def test_a_fallbacks_models_are_drawn_beside_the_state_where_the_policy_decides():
    from forge.diagram import diagram, mermaid

    with ChatServer([]) as primary, ChatServer([]) as backup:
        loop = loop_of(FallbackPolicy([chat("big-model", primary), chat("small-model", backup)]))
    dot = diagram(loop).source
    assert "models, in turn: big-model (openai) → small-model (openai)" in dot
    assert 'select -> __models [label="model fails: next"' in dot
    assert "note right of select : models, in turn: big-model (openai) → small-model (openai)" in mermaid(loop)
    assert "__models" not in diagram(loop_of(chat("big-model", primary))).source  # one model: no note
