"""Anthropic's Messages API as the policy (extra `forge-fsm[anthropic]`, on the official
`anthropic` SDK): `AnthropicPolicy("claude-sonnet-4-5")`.

Why a policy of its own rather than Anthropic's OpenAI-compatible endpoint: Anthropic calls
that layer a way to try its models, not for production; it drops what the Messages API
has — thinking blocks and their signatures (which must go back unchanged for the model to
go on), prompt caching, structured output on its own terms.

The conversation is kept as every forge model policy keeps it, in chat form in the run's
`LoopState.messages` (so the debugger, `forge ui`, budgets, compaction and a
`FallbackPolicy` to another provider all read one form). Each request is made from it in the
Messages form: system messages first as `system`, tool results as `tool_result` blocks of a
user turn, turns of one role merged. Each reply is read into a chat-form assistant message
(its text, its `tool_use` blocks as calls) that also keeps the reply's content blocks as
Anthropic sent them (`NATIVE`, every field, unknown ones too): the next request sends that
assistant turn back exactly so, thinking blocks and signatures included — live, replayed
from a journal, or from a cassette.

`cache` places Anthropic's prompt-cache breakpoints (`cache_control`): after the tools,
after the system prompt, after the conversation so far; `cache_ttl` is theirs ("5m" or
"1h"). Cached tokens count in `result.usage` as the other policies' do (a prompt's tokens
are its uncached, cache-read and cache-written tokens together; `cached` the read ones).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from forge.errors import UsageError
from forge.events import Sink, TextDelta, ToolCallDelta
from forge.extras import extra_module
from forge.models.chat import ModelError
from forge.models.native import NativePolicy, count

__all__ = ["CACHE_PLACES", "NATIVE", "AnthropicPolicy", "chat_request", "messages_request"]

NATIVE = "_anthropic"
"""The key of a chat-form assistant message under which the reply's content blocks are kept
as Anthropic sent them (a `_` key: a chat-completions request leaves it out)."""

CACHE_PLACES = ("tools", "system", "messages")
"""Where `AnthropicPolicy(cache=...)` may put a prompt-cache breakpoint."""


@dataclass(frozen=True)
class AnthropicPolicy(NativePolicy):
    """A policy that asks a Claude model what to do next, over Anthropic's Messages API.

    As `ChatPolicy` in everything it does with the run (see it), with `client` /
    `async_client` an `anthropic.Anthropic` / `anthropic.AsyncAnthropic` (default: made from
    ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL when first needed; given only `client`, `arun`
    talks to the same endpoint with the same key). `max_tokens` bounds each reply (the API
    requires it); `options` go into every request (`temperature`, `thinking`, …). A typed
    answer (`output=`) is asked for as structured output (`output_config`), or with
    `structured_output=False` as a `final_answer` tool. `cache` and `cache_ttl` place prompt-
    cache breakpoints (see the module).

    Raises:
        UsageError: (when made) `cache` names a place that is not one of `CACHE_PLACES`, or
            `max_tokens` is not a whole number above 0.
        anthropic.AnthropicError: (when called) the endpoint failed (the run ends in
            fatal_error, recorded).
    """

    max_tokens: int = 4096
    provider: str = "anthropic"
    cache: tuple[str, ...] = ()
    cache_ttl: str | None = None

    def __post_init__(self) -> None:
        odd = [place for place in self.cache if place not in CACHE_PLACES]
        if isinstance(self.cache, str) or odd:
            raise UsageError(f"AnthropicPolicy's cache is a tuple of places among {', '.join(CACHE_PLACES)}, got "
                             f"{self.cache!r}")
        if not isinstance(self.max_tokens, int) or isinstance(self.max_tokens, bool) or self.max_tokens < 1:
            raise UsageError(f"AnthropicPolicy's max_tokens must be a whole number above 0, got {self.max_tokens!r}")

    def _sdk(self) -> Any:
        return _anthropic()

    def _clients(self) -> tuple[Any, Any]:
        anthropic = _anthropic()
        return anthropic.Anthropic, anthropic.AsyncAnthropic

    def _create(self, client: Any, request: Mapping[str, Any], stream: bool) -> Any:
        return client.messages.create(**request, stream=True) if stream else client.messages.create(**request)

    def _streamed(self, listener: Sink) -> _Streamed:
        return _Streamed(listener)

    def _message(self, data: Mapping[str, Any]) -> dict[str, Any]:
        return assistant_message(data)

    def _counted(self, data: Mapping[str, Any]) -> tuple[int, int, int, str | None]:
        usage = data.get("usage") or {}
        read, written = count(usage.get("cache_read_input_tokens")), count(usage.get("cache_creation_input_tokens"))
        return count(usage.get("input_tokens")) + read + written, count(usage.get("output_tokens")), read, \
            data.get("stop_reason")

    WIRE: ClassVar[str] = "messages"

    def from_chat(self, chat: Mapping[str, Any]) -> dict[str, Any]:
        """A chat-completions request in the Messages form, with this policy's `max_tokens`
        and cache breakpoints (`messages_request`)."""
        return messages_request(chat, self.max_tokens, self.cache, self.cache_ttl)

    def as_chat(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """A Messages request in the chat-completions form (`chat_request`)."""
        return chat_request(request)


def messages_request(chat: Mapping[str, Any], max_tokens: int, cache: Iterable[str] = (),
                     cache_ttl: str | None = None) -> dict[str, Any]:
    """A chat-completions request (`ChatPolicy`'s, its messages with their own `_` keys) in
    the Messages form: `max_tokens`; system messages before the first other message as
    `system`, later ones (a compaction's note) as user text; an assistant turn with its
    content blocks as Anthropic sent them (`NATIVE`), else made of its text and calls; tool
    messages as `tool_result` blocks; turns of one role merged into one; tools as `{name,
    description, input_schema}`; a typed answer's schema (`response_format`) as
    `output_config`; `cache_control` at the `cache` places."""
    request: dict[str, Any] = {key: value for key, value in chat.items()
                               if key not in ("messages", "tools", "response_format")}
    request["max_tokens"] = max_tokens
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in chat["messages"]:
        role, blocks = _turn(message, after_system=bool(turns))
        if role == "system":
            system.append(blocks[0]["text"])
        elif turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        elif blocks:
            turns.append({"role": role, "content": list(blocks)})
    request["messages"] = turns
    if system:
        request["system"] = "\n\n".join(system)
    if chat.get("tools"):
        request["tools"] = [_tool(offered) for offered in chat["tools"]]
    schema = (chat.get("response_format") or {}).get("json_schema", {}).get("schema")
    if schema is not None:
        request["output_config"] = {"format": {"type": "json_schema", "schema": dict(schema)}}
    choice = chat.get("tool_choice")
    if isinstance(choice, str):  # chat's "none" / "auto" / "required", in Anthropic's words
        request["tool_choice"] = {"type": {"required": "any"}.get(choice, choice)}
    breakpoint_ = {"type": "ephemeral", **({"ttl": cache_ttl} if cache_ttl else {})}
    places = set(cache)
    if "tools" in places and request.get("tools"):
        request["tools"][-1] = {**request["tools"][-1], "cache_control": breakpoint_}
    if "system" in places and system:
        request["system"] = [{"type": "text", "text": request["system"], "cache_control": breakpoint_}]
    if "messages" in places and turns:
        last = turns[-1]["content"]
        last[-1] = {**last[-1], "cache_control": breakpoint_}
    return request


def chat_request(request: Mapping[str, Any]) -> dict[str, Any]:
    """A Messages request in the chat-completions form (what another provider's model is
    sent by a `FallbackPolicy`): `system` as a system message, text blocks as text, `tool_use`
    blocks as calls, `tool_result` blocks as tool messages, the Messages tools as functions,
    `output_config` as `response_format`; what only Anthropic reads (thinking blocks, cache
    breakpoints, `max_tokens`) left out."""
    chat: dict[str, Any] = {key: value for key, value in request.items()
                            if key not in ("messages", "system", "tools", "output_config", "max_tokens")}
    messages: list[dict[str, Any]] = []
    system = request.get("system")
    if system:
        text = system if isinstance(system, str) else "\n\n".join(block.get("text", "") for block in system)
        messages.append({"role": "system", "content": text})
    for turn in request.get("messages", ()):
        blocks = turn["content"] if isinstance(turn["content"], list) else [{"type": "text", "text": turn["content"]}]
        text = "".join(block.get("text", "") for block in blocks if block.get("type") == "text")
        if turn["role"] == "assistant":
            message: dict[str, Any] = {"role": "assistant", "content": text or None}
            calls = [{"id": block["id"], "type": "function",
                      "function": {"name": block["name"], "arguments": json.dumps(block.get("input") or {})}}
                     for block in blocks if block.get("type") == "tool_use"]
            if calls:
                message["tool_calls"] = calls
            messages.append(message)
            continue
        messages.extend({"role": "tool", "tool_call_id": block["tool_use_id"], "content": str(block.get("content"))}
                        for block in blocks if block.get("type") == "tool_result")
        if text:
            messages.append({"role": "user", "content": text})
    chat["messages"] = messages
    if request.get("tools"):
        chat["tools"] = [{"type": "function", "function": {
            "name": tool["name"], "description": tool.get("description", ""), "parameters": tool["input_schema"],
            **({"strict": True} if tool.get("strict") else {})}} for tool in request["tools"]]
    schema = ((request.get("output_config") or {}).get("format") or {}).get("schema")
    if schema is not None:
        chat["response_format"] = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
    choice = (request.get("tool_choice") or {}).get("type")
    if choice in ("none", "auto", "any"):
        chat["tool_choice"] = {"any": "required"}.get(choice, choice)
    return chat


def _turn(message: Mapping[str, Any], after_system: bool) -> tuple[str, list[dict[str, Any]]]:
    """One chat-form message as a Messages turn's role and content blocks."""
    role, content = message.get("role"), message.get("content")
    if role == "system":
        return ("user" if after_system else "system"), [{"type": "text", "text": str(content or "")}]
    if role == "tool":
        return "user", [{"type": "tool_result", "tool_use_id": message["tool_call_id"], "content": str(content or "")}]
    if role == "assistant":
        native = message.get(NATIVE)
        if isinstance(native, list):
            return "assistant", [dict(block) for block in native]
        blocks: list[dict[str, Any]] = [{"type": "text", "text": content}] if content else []
        for call in message.get("tool_calls") or ():
            arguments = call["function"].get("arguments") or "{}"
            blocks.append({"type": "tool_use", "id": call["id"], "name": call["function"]["name"],
                           "input": json.loads(arguments) if isinstance(arguments, str) else arguments})
        return "assistant", blocks
    return "user", [{"type": "text", "text": str(content)}] if content else []


def _tool(offered: Mapping[str, Any]) -> dict[str, Any]:
    """A chat-completions tool (`{"type": "function", "function": …}`) as a Messages tool."""
    function = offered["function"]
    tool = {"name": function["name"], "description": function.get("description") or function["name"],
            "input_schema": function.get("parameters") or {"type": "object", "properties": {}}}
    if function.get("strict"):
        tool["strict"] = True
    return tool


def assistant_message(data: Mapping[str, Any]) -> dict[str, Any]:
    """A Messages reply (its JSON) as a chat-form assistant message: its text, its
    `tool_use` blocks as calls, a refusal when it stopped for one, and its content blocks as
    sent (`NATIVE`).

    Raises:
        ModelError: the reply has no list of content blocks.
    """
    blocks = data.get("content")
    if not isinstance(blocks, list):
        raise ModelError(f"the model's endpoint answered without content blocks: {str(data)[:200]!r}")
    text = "".join(str(block.get("text") or "") for block in blocks if block.get("type") == "text")
    message: dict[str, Any] = {"role": "assistant", "content": text or None, NATIVE: blocks}
    calls = [{"id": block["id"], "type": "function",
              "function": {"name": block["name"], "arguments": json.dumps(block.get("input") or {})}}
             for block in blocks if block.get("type") == "tool_use"]
    if calls:
        message["tool_calls"] = calls
    if data.get("stop_reason") == "refusal":
        message["refusal"] = text or "the model declined to answer"
    return message


class _Streamed:
    """A streamed reply, put together event by event (Anthropic's `message_start`,
    `content_block_start` / `_delta` / `_stop`, `message_delta`, `message_stop`) into the
    JSON a reply sent without streaming has, each piece of text and of a tool call told to
    `listener` as it comes."""

    def __init__(self, listener: Sink) -> None:
        self.listener = listener
        self.data: dict[str, Any] = {}
        self.blocks: dict[int, dict[str, Any]] = {}
        self.inputs: dict[int, list[str]] = {}
        self.calls: dict[int, int] = {}  # a tool_use block's index → its place among the reply's calls

    def take(self, event: Any) -> None:
        kind = event.type
        if kind == "message_start":
            self.data = event.message.model_dump(mode="json", exclude_unset=True)
        elif kind == "content_block_start":
            block = event.content_block.model_dump(mode="json", exclude_unset=True)
            self.blocks[event.index] = block
            if block.get("type") == "tool_use":
                self.calls[event.index] = len(self.calls)
                self.inputs[event.index] = []
                self.listener(ToolCallDelta(self.calls[event.index], block.get("id"), block.get("name"), ""))
        elif kind == "content_block_delta":
            self._delta(event.index, event.delta)
        elif kind == "content_block_stop" and event.index in self.inputs:
            text = "".join(self.inputs.pop(event.index))
            self.blocks[event.index]["input"] = json.loads(text) if text.strip() else {}
        elif kind == "message_delta":
            self.data.update({key: value for key, value in event.delta.model_dump(mode="json").items()
                              if value is not None})
            usage = event.usage.model_dump(mode="json", exclude_none=True) if event.usage is not None else {}
            self.data["usage"] = {**(self.data.get("usage") or {}), **usage}

    def _delta(self, index: int, delta: Any) -> None:
        block, kind = self.blocks[index], delta.type
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta.text
            self.listener(TextDelta(delta.text))
        elif kind == "input_json_delta":
            self.inputs[index].append(delta.partial_json)
            self.listener(ToolCallDelta(self.calls[index], None, None, delta.partial_json))
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta.thinking
        elif kind == "signature_delta":
            block["signature"] = block.get("signature", "") + delta.signature
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(delta.citation.model_dump(mode="json", exclude_unset=True))

    def reply(self) -> dict[str, Any]:
        """The reply as a request sent without streaming gets it.

        Raises:
            ModelError: the stream held no `message_start`.
        """
        if not self.data:
            raise ModelError("the model's endpoint streamed no message_start event")
        return {**self.data, "content": [self.blocks[index] for index in sorted(self.blocks)]}


def _anthropic() -> Any:
    """The `anthropic` SDK, imported when the policy first talks to its endpoint.

    Raises:
        ImportError: it is not installed, saying how to install it.
    """
    return extra_module("anthropic", "anthropic", "AnthropicPolicy")
