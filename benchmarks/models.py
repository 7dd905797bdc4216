"""What a native model policy costs beyond its provider's SDK, side by side in one run
(issue 51: at most 1.2x): for each policy, N requests of a three-turn conversation (a user
turn, a tool call, its result) to forge's local server speaking the provider's wire form,
made two ways, alternated: the bare SDK call with the request already in the provider's
form, and the policy's own work for the same decision — building the request from the run's
chat-form conversation, sending it through the same SDK client, reading the reply into the
chat form with its own parts kept. Also printed: fallback over a model that answers at once
against that model alone (issue 51: no cost).

    python benchmarks/models.py [--quick]
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable
from typing import Any

from targets import against

from forge import tool
from forge.chat_server import ChatServer, reply
from forge.models.fallback import FallbackPolicy

CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "You keep notes."},
    {"role": "user", "content": "What does todo.md say?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "read_note", "arguments": '{"path": "todo.md"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "buy milk"},
]


def _policies(server: ChatServer) -> dict[str, tuple[Any, Callable[[Any, dict[str, Any]], Any]]]:
    """Each policy on `server`, with the bare SDK call of its client."""
    import anthropic
    import openai
    from google import genai

    from forge.models.anthropic import AnthropicPolicy
    from forge.models.chat import ChatPolicy
    from forge.models.gemini import GeminiPolicy
    from forge.models.responses import ResponsesPolicy

    chat_client = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0)
    claude = anthropic.Anthropic(base_url=server.base, api_key="k", max_retries=0)
    gemini = genai.Client(api_key="k", http_options={"base_url": server.base})
    return {
        "ChatPolicy (chat completions)": (ChatPolicy("m", client=chat_client, ask=False),
                                          lambda client, r: client.chat.completions.create(**r)),
        "AnthropicPolicy (Messages)": (AnthropicPolicy("m", client=claude, ask=False),
                                       lambda client, r: client.messages.create(**r)),
        "ResponsesPolicy (Responses)": (ResponsesPolicy("m", client=chat_client, ask=False),
                                        lambda client, r: client.responses.create(**r)),
        "GeminiPolicy (generateContent)": (GeminiPolicy("m", client=gemini, ask=False),
                                           lambda client, r: client.models.generate_content(
                                               model=r["model"], contents=r["contents"], config=r.get("config"))),
    }


def _policy_side(policy: Any, requests: int, sender: Any = None) -> float:
    """The policy's work per decision: its request built from the conversation, sent (by
    `sender` when given: a fallback over it), read."""
    policy = policy.with_tools([read_note])
    sender = sender.with_tools([read_note]) if sender is not None else policy
    gc.collect()
    started = time.perf_counter()
    for _ in range(requests):
        reply_ = sender.send(policy._request(list(CONVERSATION)))
        assert reply_["message"]["content"] == "It says: buy milk."
    return (time.perf_counter() - started) / requests


def _bare_side(policy: Any, call: Callable[[Any, dict[str, Any]], Any], requests: int) -> float:
    """The SDK's call alone, the request already made in its form."""
    policy = policy.with_tools([read_note])
    request, client = policy._request(list(CONVERSATION)), policy._sync_client()
    gc.collect()
    started = time.perf_counter()
    for _ in range(requests):
        call(client, request)
    return (time.perf_counter() - started) / requests


@tool
def read_note(path: str) -> str:
    """Read a note."""
    return "buy milk"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    requests, rounds = (100, 3) if args.quick else (400, 5)
    with ChatServer(lambda body: reply("It says: buy milk.")) as server:
        for name, (policy, call) in _policies(server).items():
            bare, own = [], []
            for _ in range(rounds):  # alternated, so drift on a shared machine falls on both sides alike
                bare.append(_bare_side(policy, call, requests))
                own.append(_policy_side(policy, requests))
            ratio = min(own) / min(bare)
            print(f"{name:32s} per request {min(own) * 1e6:8.1f} us against the bare SDK call "
                  f"{min(bare) * 1e6:8.1f} us (best of {rounds} x {requests}): {ratio:5.3f}x {against(ratio, 1.2)}")
        chat_policy, _ = _policies(server)["ChatPolicy (chat completions)"]
        alone, fallback = [], []
        backed = FallbackPolicy([chat_policy, chat_policy])
        for _ in range(rounds):
            alone.append(_policy_side(chat_policy, requests))
            fallback.append(_policy_side(chat_policy, requests, sender=backed))
        ratio = min(fallback) / min(alone)
        print(f"{'FallbackPolicy, first answers':32s} per request {min(fallback) * 1e6:8.1f} us against its first "
              f"model alone {min(alone) * 1e6:8.1f} us: {ratio:5.3f}x {against(ratio, 1.05)}")


if __name__ == "__main__":
    main()
