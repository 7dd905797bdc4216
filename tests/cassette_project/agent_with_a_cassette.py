"""A user's agent test with a forge cassette: tests/test_cassettes.py copies it into a project
folder as test_notes_agent.py and runs pytest there in its own
pytest process: a ChatPolicy over the chat-completions server at $CHAT_URL, with a secret
argument masked by redact. Each run appends what it saw to $CASSETTE_OUT."""

import json
import os

import openai
import pytest

from forge import AgentLoop, Finish, Hooks, tool
from forge.models.chat import ChatPolicy


@tool
def read_note(path: str, token: str) -> str:
    """Read a note with an access token (each call is counted in $CASSETTE_OUT.calls)."""
    with open(os.environ["CASSETTE_OUT"] + ".calls", "a") as calls:
        calls.write(f"read_note {path}\n")
    return f"buy milk (from {path})"


def redact(tool_name, field, value):
    if field == "arguments" and isinstance(value, dict) and "token" in value:
        return {**value, "token": "***"}
    return value


def untimed(detail):
    """`detail` without the model call's clock (when it started, how long it took): a
    cassette keeps no wall-clock value, so a replay cannot say them."""
    messages = [{**m, "_usage": {**m["_usage"], "started": None, "seconds": None}} if "_usage" in m else m
                for m in detail.get("messages", [])]
    return {**detail, "messages": messages} if messages else dict(detail)


@pytest.mark.forge_cassette("notes")
def test_the_agent_reads_the_note(cassette):
    policy = ChatPolicy("test-model", client=openai.OpenAI(base_url=os.environ["CHAT_URL"], api_key="k",
                                                           max_retries=0, timeout=5))
    loop = AgentLoop([read_note], policy, lambda o: isinstance(o.payload, Finish), hooks=Hooks(redact=redact))
    result = cassette.run(loop, "what is in todo.md?")
    with open(os.environ["CASSETTE_OUT"], "a") as out:
        out.write(json.dumps({"recorded": cassette.recorded, "reason": result.reason,
                              "trace": [[r.source, r.trigger, r.dest, r.verdict, untimed(r.detail)]
                                        for r in result.trace]}) + "\n")
    assert result.reason == "verified_success"
