"""Google's Gemini API as the policy (extra `forge-fsm[gemini]`, on the official
`google-genai` SDK): `GeminiPolicy("gemini-2.5-flash")`.

Why beside Gemini's OpenAI-compatible endpoint: a Gemini 3 model signs its function calls
(`thought_signature`) and answers a request that does not send the signature back with a
4xx; the native API is where the signatures, thinking parts and Gemini's own options live.

As the other native policies (`forge.models`): the run keeps the conversation in chat form;
each request is made from it in the `generateContent` form as the SDK takes it (`model`,
`contents`, `config`: leading system messages as `system_instruction`, the model's turns as
the parts it sent, each tool result as a `function_response` part naming its call's
function, tools as `function_declarations` with their JSON Schemas, a typed answer's schema
as `response_json_schema`, the chat options such as `temperature` in `config`); each
reply's parts are kept as the SDK read them (`NATIVE`, signatures included) and sent back
so. Gemini's calls may come without ids: such a call's id is `gemini-N`, its place in the
reply.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from forge.events import Sink, TextDelta, ToolCallDelta
from forge.extras import extra_module
from forge.models.chat import ModelError
from forge.models.native import NativePolicy, count

__all__ = ["NATIVE", "GeminiPolicy", "chat_request", "gemini_request"]

NATIVE = "_gemini"
"""The key of a chat-form assistant message under which the reply's parts are kept as the
SDK read them."""


@dataclass(frozen=True)
class GeminiPolicy(NativePolicy):
    """A policy that asks a Gemini model what to do next over Google's Gemini API.

    As `ChatPolicy` in everything it does with the run (see it), with `client` a
    `google.genai.Client` (default: made from GEMINI_API_KEY / GOOGLE_API_KEY when first
    needed; `arun` uses its `aio` side, so `async_client` is not needed); `options` go into
    every request's `config` (`temperature`, `thinking_config`, …).

    Raises (when called):
        google.genai.errors.APIError: the endpoint failed (the run ends in fatal_error).
    """

    provider: str = "gemini"
    WIRE: ClassVar[str] = "gemini"

    def from_chat(self, chat: Mapping[str, Any]) -> dict[str, Any]:
        """A chat-completions request in the `generateContent` form (`gemini_request`)."""
        return gemini_request(chat)

    def as_chat(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """A `generateContent` request in the chat-completions form (`chat_request`)."""
        return chat_request(request)

    def _sdk(self) -> Any:
        return _genai()

    def _unreachable(self) -> tuple[type[Exception], ...]:
        return _transport_errors()

    def _sync_client(self) -> Any:
        if self.client is None:
            object.__setattr__(self, "client", _genai().Client())
        return self.client

    def _async_client(self) -> Any:
        return self.async_client if self.async_client is not None else self._sync_client().aio

    def _create(self, client: Any, request: Mapping[str, Any], stream: bool) -> Any:
        models = client.models
        call = models.generate_content_stream if stream else models.generate_content
        return call(model=request["model"], contents=request["contents"], config=request.get("config"))

    def _dump(self, response: Any) -> dict[str, Any]:
        dumped: dict[str, Any] = response.model_dump(mode="json", exclude_none=True, exclude={"sdk_http_response"})
        return dumped

    def _streamed(self, listener: Sink) -> _Streamed:
        return _Streamed(listener, self._dump)

    def _message(self, data: Mapping[str, Any]) -> dict[str, Any]:
        return assistant_message(data)

    def _counted(self, data: Mapping[str, Any]) -> tuple[int, int, int, str | None]:
        usage = data.get("usage_metadata") or {}
        candidates = data.get("candidates") or [{}]
        calls = any("function_call" in part for part in _parts(data))
        return count(usage.get("prompt_token_count")), \
            count(usage.get("candidates_token_count")) + count(usage.get("thoughts_token_count")), \
            count(usage.get("cached_content_token_count")), \
            "tool_calls" if calls else candidates[0].get("finish_reason")

    def _reply(self, response: Any, started: float, seconds: float) -> dict[str, Any]:
        reply = super()._reply(response, started, seconds)
        reply["usage"]["model"] = reply["usage"].get("model") or response.get("model_version")
        return reply


def gemini_request(chat: Mapping[str, Any]) -> dict[str, Any]:
    """A chat-completions request (its messages with their own `_` keys) in the
    `generateContent` form the SDK takes (see the module)."""
    config: dict[str, Any] = {key: value for key, value in chat.items()
                              if key not in ("model", "messages", "tools", "response_format", "tool_choice")}
    if isinstance(chat.get("tool_choice"), str):  # chat's "none" / "auto" / "required", in Gemini's words
        mode = {"none": "NONE", "auto": "AUTO", "required": "ANY"}.get(chat["tool_choice"], "AUTO")
        config["tool_config"] = {"function_calling_config": {"mode": mode}}
    system: list[str] = []
    contents: list[dict[str, Any]] = []
    named: dict[str, str] = {}  # a call's id → its function's name, for its function_response
    for message in chat["messages"]:
        role, content = message.get("role"), message.get("content")
        if role == "system" and not contents:
            system.append(str(content or ""))
            continue
        if role == "assistant":
            calls = message.get("tool_calls") or ()
            named.update({call["id"]: call["function"]["name"] for call in calls})
            native = message.get(NATIVE)
            parts = [dict(part) for part in native] if isinstance(native, list) else \
                ([{"text": content}] if content else []) + [
                    {"function_call": {"name": call["function"]["name"], "args": _arguments(call)}} for call in calls]
            turn = ("model", parts)
        elif role == "tool":
            call_id = message["tool_call_id"]
            response = {"function_response": {"name": named.get(call_id, call_id), "response": {"result": content}}}
            if not call_id.startswith("gemini-"):
                response["function_response"]["id"] = call_id
            turn = ("user", [response])
        else:
            turn = ("user", [{"text": str(content)}] if content else [])
        if contents and contents[-1]["role"] == turn[0]:
            contents[-1]["parts"].extend(turn[1])
        elif turn[1]:
            contents.append({"role": turn[0], "parts": list(turn[1])})
    if system:
        config["system_instruction"] = "\n\n".join(system)
    if chat.get("tools"):
        config["tools"] = [{"function_declarations": [
            {"name": tool["function"]["name"], "description": tool["function"].get("description") or "",
             "parameters_json_schema": tool["function"].get("parameters") or {"type": "object", "properties": {}}}
            for tool in chat["tools"]]}]
    schema = (chat.get("response_format") or {}).get("json_schema", {}).get("schema")
    if schema is not None:
        config["response_mime_type"] = "application/json"
        config["response_json_schema"] = schema
    request: dict[str, Any] = {"model": chat["model"], "contents": contents}
    if config:
        request["config"] = config
    return request


def chat_request(request: Mapping[str, Any]) -> dict[str, Any]:
    """A `generateContent` request in the chat-completions form (what another provider's
    model is sent by a `FallbackPolicy`); what only Gemini reads (signatures, thinking
    parts) left out."""
    config = dict(request.get("config") or {})
    messages: list[dict[str, Any]] = []
    system = config.pop("system_instruction", None)
    if system:
        messages.append({"role": "system", "content": system if isinstance(system, str) else str(system)})
    tools = config.pop("tools", None)
    mode = ((config.pop("tool_config", None) or {}).get("function_calling_config") or {}).get("mode")
    if mode in ("NONE", "AUTO", "ANY"):
        config["tool_choice"] = {"NONE": "none", "AUTO": "auto", "ANY": "required"}[mode]
    schema = config.pop("response_json_schema", None)
    config.pop("response_mime_type", None)
    pending: list[tuple[str, str]] = []  # the last model turn's calls not answered yet: (id, function)
    for turn in request.get("contents") or ():
        parts = turn.get("parts") or ()
        text = "".join(str(part.get("text") or "") for part in parts if "text" in part and not part.get("thought"))
        if turn.get("role") == "model":
            message: dict[str, Any] = {"role": "assistant", "content": text or None}
            calls = [part["function_call"] for part in parts if "function_call" in part]
            if calls:
                message["tool_calls"] = [{"id": call.get("id") or f"gemini-{number}", "type": "function",
                                          "function": {"name": call["name"], "arguments": json.dumps(call.get("args")
                                                                                                     or {})}}
                                         for number, call in enumerate(calls)]
            pending = [(call["id"], call["function"]["name"]) for call in message.get("tool_calls", ())]
            messages.append(message)
            continue
        for part in parts:
            answered = part.get("function_response")
            if answered is not None:
                result = (answered.get("response") or {}).get("result")
                call_id = answered.get("id") or next((i for i, name in pending if name == answered["name"]),
                                                     answered["name"])  # no id: the first call of its function
                pending = [each for each in pending if each[0] != call_id]
                messages.append({"role": "tool", "tool_call_id": call_id,
                                 "content": result if isinstance(result, str) else json.dumps(result)})
        if text:
            messages.append({"role": "user", "content": text})
    chat: dict[str, Any] = {"model": request["model"], "messages": messages, **config}
    if tools:
        chat["tools"] = [{"type": "function", "function": {"name": each["name"], "description": each.get("description", ""),
                                                           "parameters": each.get("parameters_json_schema")}}
                         for tool in tools for each in tool.get("function_declarations") or ()]
    if schema is not None:
        chat["response_format"] = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
    return chat


def _arguments(call: Mapping[str, Any]) -> Any:
    arguments = call["function"].get("arguments") or "{}"
    return json.loads(arguments) if isinstance(arguments, str) else arguments


def _parts(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    candidates = data.get("candidates") or []
    return list(((candidates[0].get("content") or {}).get("parts") or ()) if candidates else ())


def assistant_message(data: Mapping[str, Any]) -> dict[str, Any]:
    """A `generateContent` reply (as the SDK reads it) as a chat-form assistant message:
    the text of its parts (not its thoughts), its `function_call` parts as calls, a refusal
    when a safety block stopped it, and its parts as read (`NATIVE`).

    Raises:
        ModelError: the reply has no candidate (a prompt blocked, say: its reason named).
    """
    candidates = data.get("candidates")
    if not candidates:
        blocked = (data.get("prompt_feedback") or {}).get("block_reason")
        raise ModelError(f"the model's endpoint answered without a candidate{f' (blocked: {blocked})' if blocked else ''}")
    parts = _parts(data)
    text = "".join(str(part.get("text") or "") for part in parts if "text" in part and not part.get("thought"))
    message: dict[str, Any] = {"role": "assistant", "content": text or None, NATIVE: parts}
    calls = [part["function_call"] for part in parts if "function_call" in part]
    if calls:
        message["tool_calls"] = [{"id": call.get("id") or f"gemini-{number}", "type": "function",
                                  "function": {"name": call["name"], "arguments": json.dumps(call.get("args") or {})}}
                                 for number, call in enumerate(calls)]
    if candidates[0].get("finish_reason") in ("SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII"):
        message["refusal"] = f"the model stopped: {candidates[0]['finish_reason']}"
    return message


class _Streamed:
    """A streamed reply, put together chunk by chunk: text parts joined (a chunk's text told
    to `listener`), each function call whole (told as one `ToolCallDelta`), the last chunk's
    finish reason and usage."""

    def __init__(self, listener: Sink, dump: Any) -> None:
        self.listener, self.dump = listener, dump
        self.data: dict[str, Any] = {}
        self.parts: list[dict[str, Any]] = []
        self.calls = 0

    def take(self, chunk: Any) -> None:
        data = self.dump(chunk)
        for part in _parts(data):
            last = self.parts[-1] if self.parts else None
            if "text" in part and last is not None and "text" in last and bool(last.get("thought")) == \
                    bool(part.get("thought")) and "thought_signature" not in last:
                last["text"] += part["text"]
                last.update({key: value for key, value in part.items() if key != "text"})
            else:
                self.parts.append(dict(part))
            if "text" in part and not part.get("thought"):
                self.listener(TextDelta(part["text"]))
            elif "function_call" in part:
                call = part["function_call"]
                self.listener(ToolCallDelta(self.calls, call.get("id") or f"gemini-{self.calls}", call["name"],
                                            json.dumps(call.get("args") or {})))
                self.calls += 1
        candidates = data.get("candidates") or [{}]
        self.data = {**self.data, **{key: value for key, value in data.items() if key != "candidates"},
                     "candidates": [{**(self.data.get("candidates") or [{}])[0],
                                     **{k: v for k, v in candidates[0].items() if k != "content"}}]}

    def reply(self) -> dict[str, Any]:
        if not self.data:
            raise ModelError("the model's endpoint streamed no chunk")
        candidate = {**self.data["candidates"][0], "content": {"role": "model", "parts": self.parts}}
        return {**self.data, "candidates": [candidate]}


def _transport_errors() -> tuple[type[Exception], ...]:
    """The errors of the HTTP client google-genai talks through (httpx2, or httpx before
    it) for an endpoint that could not be reached."""
    import importlib

    found = []
    for name in ("httpx2", "httpx"):
        try:
            found.append(importlib.import_module(name).TransportError)
        except ImportError:
            continue
    return tuple(found)


def _genai() -> Any:
    """The `google.genai` SDK, imported when the policy first talks to Gemini.

    Raises:
        ImportError: it is not installed, saying how to install it.
    """
    return extra_module("google.genai", "gemini", "GeminiPolicy", "google-genai")
