"""OpenAI's Responses API as the policy (extra `forge-fsm[llm]`, on the official `openai`
client): `ResponsesPolicy("gpt-5")`.

Why beside `ChatPolicy`: the Responses API is what OpenAI's reasoning models and its own
Agents SDK use; a reply is a list of output items — reasoning items among them — and a
reasoning model goes on from its reasoning only when those items come back in the next
request's input. Chat completions has no place for them.

As the other native policies (`forge.models`): the run keeps the conversation in chat form;
each request is made from it in the Responses form (leading system messages as
`instructions`, a tool result as a `function_call_output` item, an assistant turn as the
output items it came as, tools as `{"type": "function", name, parameters, strict}`, a typed
answer's schema as `text.format`); each reply's output items are kept as sent (`NATIVE`,
reasoning items and their `encrypted_content` included) and sent back so. With
`store=False` in `options` (nothing kept on OpenAI's side), ask for the reasoning's
encrypted content too: `options={"store": False, "include": ["reasoning.encrypted_content"]}`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from forge.events import Sink, TextDelta, ToolCallDelta
from forge.models.chat import ModelError, _openai
from forge.models.native import NativePolicy, count

__all__ = ["NATIVE", "ResponsesPolicy", "chat_request", "responses_request"]

NATIVE = "_responses"
"""The key of a chat-form assistant message under which the reply's output items are kept
as OpenAI sent them."""


@dataclass(frozen=True)
class ResponsesPolicy(NativePolicy):
    """A policy that asks an OpenAI model what to do next over the Responses API.

    As `ChatPolicy` in everything it does with the run (see it), with the same `client` /
    `async_client` (`openai.OpenAI` / `openai.AsyncOpenAI`); `options` go into every request
    (`reasoning`, `store`, `include`, …). A typed answer is asked for as structured output
    (`text.format`), or with `structured_output=False` as a `final_answer` tool.

    Raises (when called):
        openai.OpenAIError: the endpoint failed (the run ends in fatal_error, recorded).
    """

    WIRE: ClassVar[str] = "responses"

    def from_chat(self, chat: Mapping[str, Any]) -> dict[str, Any]:
        """A chat-completions request in the Responses form (`responses_request`)."""
        return responses_request(chat)

    def as_chat(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """A Responses request in the chat-completions form (`chat_request`)."""
        return chat_request(request)

    def _sdk(self) -> Any:
        return _openai()

    def _clients(self) -> tuple[Any, Any]:
        openai = _openai()
        return openai.OpenAI, openai.AsyncOpenAI

    def _create(self, client: Any, request: Mapping[str, Any], stream: bool) -> Any:
        return client.responses.create(**request, stream=True) if stream else client.responses.create(**request)

    def _streamed(self, listener: Sink) -> _Streamed:
        return _Streamed(listener)

    def _message(self, data: Mapping[str, Any]) -> dict[str, Any]:
        return assistant_message(data)

    def _counted(self, data: Mapping[str, Any]) -> tuple[int, int, int, str | None]:
        usage = data.get("usage") or {}
        cached = count((usage.get("input_tokens_details") or {}).get("cached_tokens"))
        calls = any(item.get("type") == "function_call" for item in data.get("output") or ())
        return count(usage.get("input_tokens")), count(usage.get("output_tokens")), cached, \
            "tool_calls" if calls else data.get("status")


def responses_request(chat: Mapping[str, Any]) -> dict[str, Any]:
    """A chat-completions request (its messages with their own `_` keys) in the Responses
    form (see the module)."""
    request: dict[str, Any] = {key: value for key, value in chat.items()
                               if key not in ("messages", "tools", "response_format")}
    instructions: list[str] = []
    items: list[dict[str, Any]] = []
    for message in chat["messages"]:
        role, content = message.get("role"), message.get("content")
        if role == "system" and not items:
            instructions.append(str(content or ""))
        elif role == "tool":
            items.append({"type": "function_call_output", "call_id": message["tool_call_id"],
                          "output": str(content or "")})
        elif role == "assistant" and isinstance(message.get(NATIVE), list):
            items.extend(dict(item) for item in message[NATIVE])
        elif role == "assistant":
            if content:
                items.append({"role": "assistant", "content": content})
            items.extend({"type": "function_call", "call_id": call["id"], "name": call["function"]["name"],
                          "arguments": call["function"].get("arguments") or "{}"}
                         for call in message.get("tool_calls") or ())
        elif content:
            items.append({"role": role, "content": content})
    if instructions:
        request["instructions"] = "\n\n".join(instructions)
    request["input"] = items
    if chat.get("tools"):
        request["tools"] = [{"type": "function", "name": tool["function"]["name"],
                             "description": tool["function"].get("description") or "",
                             "parameters": tool["function"].get("parameters") or {"type": "object", "properties": {}},
                             "strict": bool(tool["function"].get("strict"))} for tool in chat["tools"]]
    shape = (chat.get("response_format") or {}).get("json_schema")
    if shape is not None:
        request["text"] = {"format": {"type": "json_schema", "name": shape.get("name") or "answer",
                                      "schema": shape["schema"], "strict": bool(shape.get("strict"))}}
    return request


def chat_request(request: Mapping[str, Any]) -> dict[str, Any]:
    """A Responses request in the chat-completions form (what another provider's model is
    sent by a `FallbackPolicy`): `instructions` as a system message, role items as messages,
    `function_call` items as the calls of an assistant message, `function_call_output` items
    as tool messages; reasoning items (only OpenAI reads them) left out."""
    chat: dict[str, Any] = {key: value for key, value in request.items()
                            if key not in ("input", "instructions", "tools", "text")}
    messages: list[dict[str, Any]] = []
    if request.get("instructions"):
        messages.append({"role": "system", "content": request["instructions"]})
    for item in request.get("input") or ():
        kind = item.get("type", "message")
        if kind == "function_call":
            if not messages or messages[-1]["role"] != "assistant":
                messages.append({"role": "assistant", "content": None})
            messages[-1].setdefault("tool_calls", []).append(
                {"id": item["call_id"], "type": "function",
                 "function": {"name": item["name"], "arguments": item.get("arguments") or "{}"}})
        elif kind == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": str(item.get("output"))})
        elif kind == "message":
            messages.append({"role": item["role"], "content": _text_of(item.get("content"))})
    chat["messages"] = messages
    if request.get("tools"):
        chat["tools"] = [{"type": "function", "function": {
            "name": tool["name"], "description": tool.get("description", ""), "parameters": tool["parameters"],
            **({"strict": True} if tool.get("strict") else {})}} for tool in request["tools"]]
    shape = ((request.get("text") or {}).get("format") or {})
    if shape.get("type") == "json_schema":
        chat["response_format"] = {"type": "json_schema", "json_schema": {"name": shape.get("name", "answer"),
                                                                          "schema": shape["schema"]}}
    return chat


def _text_of(content: Any) -> str | None:
    """A message item's text: a string, or its text parts put together."""
    if content is None or isinstance(content, str):
        return content
    return "".join(str(part.get("text") or "") for part in content if isinstance(part, Mapping)) or None


def assistant_message(data: Mapping[str, Any]) -> dict[str, Any]:
    """A Responses reply (its JSON) as a chat-form assistant message: the text of its
    message items, its `function_call` items as calls, a refusal, and its output items as
    sent (`NATIVE`).

    Raises:
        ModelError: the reply has no list of output items.
    """
    output = data.get("output")
    if not isinstance(output, list):
        raise ModelError(f"the model's endpoint answered without output items: {str(data)[:200]!r}")
    parts = [part for item in output if item.get("type") == "message" for part in item.get("content") or ()]
    text = "".join(str(part.get("text") or "") for part in parts if part.get("type") == "output_text")
    refusal = "".join(str(part.get("refusal") or "") for part in parts if part.get("type") == "refusal")
    message: dict[str, Any] = {"role": "assistant", "content": text or None, NATIVE: output}
    calls = [{"id": item["call_id"], "type": "function",
              "function": {"name": item["name"], "arguments": item.get("arguments") or "{}"}}
             for item in output if item.get("type") == "function_call"]
    if calls:
        message["tool_calls"] = calls
    if refusal:
        message["refusal"] = refusal
    return message


class _Streamed:
    """A streamed Responses reply: the text and the calls' arguments told to `listener` as
    their deltas come (`response.output_text.delta`, `response.output_item.added`,
    `response.function_call_arguments.delta`); the reply is the whole response the stream
    ends with (`response.completed`, or `response.incomplete`)."""

    def __init__(self, listener: Sink) -> None:
        self.listener = listener
        self.calls: dict[int, int] = {}  # a function_call item's output index → its place among the calls
        self.done: dict[str, Any] | None = None

    def take(self, event: Any) -> None:
        kind = event.type
        if kind == "response.output_text.delta":
            self.listener(TextDelta(event.delta))
        elif kind == "response.output_item.added" and event.item.type == "function_call":
            self.calls[event.output_index] = len(self.calls)
            self.listener(ToolCallDelta(self.calls[event.output_index], event.item.call_id, event.item.name, ""))
        elif kind == "response.function_call_arguments.delta" and event.output_index in self.calls:
            self.listener(ToolCallDelta(self.calls[event.output_index], None, None, event.delta))
        elif kind in ("response.completed", "response.incomplete"):
            self.done = event.response.model_dump(mode="json", exclude_unset=True)

    def reply(self) -> dict[str, Any]:
        if self.done is None:
            raise ModelError("the model's endpoint streamed no response.completed event")
        return self.done
