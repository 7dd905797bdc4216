"""A provider's reply goes back to it as it came (issue 51, item 1): fields forge has no
name for — a reasoning model's `reasoning_content`, Gemini's
`extra_content.google.thought_signature` on a tool call — reach the next request
unchanged, whether the reply was streamed or not, and a replay from the journal makes the
same requests."""

import json

import openai
import pytest

from forge import AgentLoop, Finish, tool
from forge.chat_server import ChatServer, reply
from forge.events import RunFinished
from forge.models.chat import ChatPolicy

SIGNATURE = {"google": {"thought_signature": "CmQBcsjafQ3bNq+signed=="}}


@tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    return "4 °C, rain"


def signed_script():
    asked = reply(None, ("c1", "weather", {"city": "Oslo"}))
    asked["reasoning_content"] = "The user wants Oslo's weather; I will look it up."
    asked["tool_calls"][0]["extra_content"] = SIGNATURE
    return [asked, reply("Rain in Oslo.")]


def agent(server):
    model = ChatPolicy("gemini-3-pro", client=openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0))
    return AgentLoop([weather], model, verify=lambda observation: isinstance(observation.payload, Finish))


def sent_back(request):
    return next(message for message in request["messages"] if message["role"] == "assistant")


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
def test_a_signed_reply_with_its_reasoning_reaches_the_next_request_unchanged(streamed):
    with ChatServer(signed_script()) as server:
        loop = agent(server)
        if streamed:
            result = next(e for e in loop.stream("weather in Oslo?") if isinstance(e, RunFinished)).result
        else:
            result = loop.run("weather in Oslo?")
    assert result.reason == "verified_success"
    again = sent_back(server.requests[1])
    assert again["reasoning_content"] == "The user wants Oslo's weather; I will look it up."
    assert again["tool_calls"][0]["extra_content"] == SIGNATURE
    assert again["tool_calls"][0]["function"] == {"name": "weather", "arguments": '{"city": "Oslo"}'}


def test_a_replay_makes_the_same_requests_the_signature_in_them(tmp_path):
    from forge import write_trace

    with ChatServer(signed_script()) as server:
        loop = agent(server)
        result = loop.run("weather in Oslo?")
    write_trace(result.trace, tmp_path / "run.jsonl", journal=result.journal)
    replayed = loop.replay(tmp_path / "run.jsonl")  # the server is gone: nothing is asked again
    assert replayed.trace == result.trace
    assert sent_back({"messages": replayed.state.messages})["tool_calls"][0]["extra_content"] == SIGNATURE


@pytest.mark.slow
def test_a_gemini_signed_call_survives_a_crash_of_its_durable_run_and_goes_back_signed(tmp_path):
    """Issue 51's done-when: the process dies in the tool the signed call asked for; a new
    process recovers the run from its database (the model not asked again for that reply)
    and the next request carries the call with its signature, read back from the journal."""
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("google.genai", reason="the gemini extra is a test dependency")
    script = Path(__file__).with_name("durable_signed.py")
    signed = {"functionCall": {"name": "weather", "args": {"city": "Oslo"}}, "thoughtSignature": "CiQBVKhcXw=="}
    with ChatServer([{**reply(None), "_parts": [signed]}, reply("Rain in Oslo.")]) as server:
        command = [sys.executable, str(script), str(tmp_path / "runs.sqlite"), server.base, "signed-1",
                   str(tmp_path / "died")]
        first = subprocess.run(command, capture_output=True, text=True, timeout=120)
        assert first.returncode == 9 and len(server.requests) == 1, first.stderr[-2000:]
        second = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr[-2000:]
    assert json.loads(second.stdout.splitlines()[-1]) == {"status": "finished", "reason": "verified_success"}
    assert len(server.requests) == 2  # the signed reply came from the journal, not the model
    assert server.requests[1]["contents"][1] == {"role": "model", "parts": [signed]}
