"""forge's scripted chat endpoint (`forge.chat_server`): what the docs' offline agent and
the tests talk to through the real `openai` client."""

import openai
import pytest

from forge.chat_server import ChatServer, reply


def _client(server):
    return openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0)


def test_it_answers_its_script_in_order_and_keeps_each_request():
    with ChatServer([reply("one"), reply(None, ("c1", "look", {"q": "x"}))]) as server:
        client = _client(server)
        first = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        second = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "again"}])
    assert first.choices[0].message.content == "one"
    call = second.choices[0].message.tool_calls[0]
    assert (call.id, call.function.name, call.function.arguments) == ("c1", "look", '{"q": "x"}')
    assert [body["messages"][0]["content"] for body in server.requests] == ["hi", "again"]


def test_a_request_past_the_script_is_refused_naming_how_many_replies_it_had():
    with ChatServer([reply("only")]) as server:
        client = _client(server)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(openai.BadRequestError, match="no reply left: it had 1 and this is request 2"):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "more"}])


def test_a_streamed_reply_comes_a_word_at_a_time():
    with ChatServer([reply("the first word")]) as server:
        chunks = _client(server).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                                         stream=True)
        words = [chunk.choices[0].delta.content for chunk in chunks if chunk.choices and chunk.choices[0].delta.content]
    assert words == ["the ", "first ", "word"]
