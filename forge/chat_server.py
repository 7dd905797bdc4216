"""A chat-completions endpoint on 127.0.0.1 that answers with scripted assistant messages:
a model that says what you tell it to, for trying an LLM agent without a model or a key,
and for testing one — the real `openai` client talks to it over HTTP, and it keeps every
request body, so a test can check exactly what was sent.

    from forge.chat_server import ChatServer, reply

    script = [reply(None, ("call_1", "lookup", {"city": "Oslo"})), reply("It is 4 degrees.")]
    with ChatServer(script) as server:
        policy = ChatPolicy("any-model", base_url=server.url, api_key="not-needed")
        ...

It speaks OpenAI's chat-completions wire form, plain and streamed (`stream: true`), on a
port of its own; a request after the script's last reply is answered with a 400 error
naming how many replies it had (what `openai` raises as `BadRequestError`). It speaks
Anthropic's Messages wire form too, at `/v1/messages` (`server.base` is the base URL the
`anthropic` client takes): the same scripted messages, as content blocks (a message's
`_blocks`, when it has them, sent as they are: a thinking block and its signature, say),
plain and streamed as Anthropic's documented events; and OpenAI's Responses wire form, at
`/v1/responses` (a message's `_items`, when it has them, are its output items as they are: a
reasoning item, say), plain and streamed as its documented events; and Gemini's
`generateContent` form, at `/v1beta/models/MODEL:generateContent` and
`:streamGenerateContent` (`server.base` is the `base_url` of `google-genai`'s client; a
message's `_parts` are sent as they are: a call with its `thoughtSignature`, say).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ChatServer", "reply"]


def reply(content: str | None = None, *calls: tuple[str, str, Any]) -> dict[str, Any]:
    """An assistant message: text, and tool calls given as (id, name, arguments), where
    arguments that are not a str are sent as JSON."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function",
             "function": {"name": name, "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}}
            for call_id, name, arguments in calls
        ]
    return message


class ChatServer:
    """`with ChatServer([reply(...), ...]) as server:` then `server.url` (…/v1), `server.requests`.

    `script` may also be a function of the request body returning the message. A message's
    `_usage` (prompt_tokens, completion_tokens, and optionally prompt_tokens_details) is
    the usage its response reports (default: 1 and 1); one with `_status` (500, 429, …) is
    answered with that HTTP status and an error saying its `content`. A request with `stream: true` is
    answered as server-sent chunks, as OpenAI's endpoint streams: a message's own fields
    (`reasoning_content`, text in two pieces), the text a word at a time, each tool call's
    arguments in two pieces (its own fields, `extra_content`, with the first), then the finish reason and, when
    `stream_options.include_usage`, the usage; `pause` seconds pass before each chunk, and
    `sent` keeps when each was written (time.perf_counter())."""

    def __init__(self, script: list[dict[str, Any]] | Callable[[dict[str, Any]], dict[str, Any]],
                 pause: float = 0.0) -> None:
        self.script = script
        self.scripted = None if callable(script) else len(script)
        """How many replies the script had (None: a function makes them)."""
        self.pause = pause
        self.sent: list[float] = []
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"chat": self})
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    def next_reply(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """The script's next reply to `body`; None when it has none left."""
        if callable(self.script):
            return self.script(body)
        return self.script.pop(0) if self.script else None

    @property
    def url(self) -> str:
        return f"{self.base}/v1"

    @property
    def base(self) -> str:
        """The server's base URL, without the API's version (what `anthropic.Anthropic` takes)."""
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()


class _Handler(BaseHTTPRequestHandler):
    """One request to a `ChatServer` (its `chat`): the script's next reply, plain or streamed."""

    chat: ChatServer
    disable_nagle_algorithm = True  # headers and body go out at once: not 40 ms apart (delayed ACK)
    protocol_version = "HTTP/1.1"  # the client keeps its connection: every response says its length

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.chat.lock:
            self.chat.requests.append(body)
            message = self.chat.next_reply(body)
        if message is None:
            self._refuse(f"the chat server's script has no reply left: it had {self.chat.scripted} and this is "
                         f"request {len(self.chat.requests)}")
            return
        message = dict(message)
        status = message.pop("_status", None)
        if status is not None:  # a scripted failure: the endpoint answers with this HTTP status
            self._refuse(str(message.get("content") or f"scripted failure {status}"), int(status))
            return
        usage = message.pop("_usage", None) or {"prompt_tokens": 1, "completion_tokens": 1}
        if self.path.endswith("/messages"):
            self._messages(body, message, usage)
            return
        if self.path.endswith("/responses"):
            self._responses(body, message, usage)
            return
        if ":generateContent" in self.path or ":streamGenerateContent" in self.path:
            self._gemini(message, usage, streamed=":streamGenerateContent" in self.path)
            return
        usage = {**usage, "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]}
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        if body.get("stream"):
            self._stream(body, message, usage, finish)
            return
        self._json({
            "id": f"chatcmpl-{len(self.chat.requests)}", "object": "chat.completion", "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": usage,
        })

    def _stream(self, body: dict[str, Any], message: dict[str, Any], usage: dict[str, Any],
                finish: str) -> None:
        self._event_stream()
        base = {"id": f"chatcmpl-{len(self.chat.requests)}", "object": "chat.completion.chunk", "created": 0,
                "model": body["model"]}

        def send(choices: list[dict[str, Any]], **more: Any) -> None:
            time.sleep(self.chat.pause)
            self.wfile.write(f"data: {json.dumps({**base, 'choices': choices, **more})}\n\n".encode())
            self.wfile.flush()
            self.chat.sent.append(time.perf_counter())

        send([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
        for key, value in message.items():  # a provider's own fields (reasoning_content …): text in two pieces
            if key not in ("role", "content", "refusal", "tool_calls"):
                pieces = [value[:len(value) // 2], value[len(value) // 2:]] if isinstance(value, str) else [value]
                for piece in pieces:
                    send([{"index": 0, "delta": {key: piece}, "finish_reason": None}])
        for word in re.findall(r"\S+\s*|\s+", message.get("content") or ""):
            send([{"index": 0, "delta": {"content": word}, "finish_reason": None}])
        for index, call in enumerate(message.get("tool_calls") or ()):
            arguments = call["function"]["arguments"]
            half = len(arguments) // 2
            own = {key: value for key, value in call.items() if key not in ("id", "type", "function")}
            send([{"index": 0, "delta": {"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                                         "function": {"name": call["function"]["name"],
                                                                      "arguments": arguments[:half]}, **own}]},
                   "finish_reason": None}])
            send([{"index": 0, "delta": {"tool_calls": [{"index": index,
                                                         "function": {"arguments": arguments[half:]}}]},
                   "finish_reason": None}])
        send([{"index": 0, "delta": {}, "finish_reason": finish}])
        if (body.get("stream_options") or {}).get("include_usage"):
            send([], usage=usage)
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _messages(self, body: dict[str, Any], message: dict[str, Any], usage: dict[str, Any]) -> None:
        """Answer in Anthropic's Messages form: the reply whole, or streamed as its events."""
        blocks = message.pop("_blocks", None) or _blocks_of(message)
        cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
        counted = {"input_tokens": usage["prompt_tokens"] - cached, "output_tokens": usage["completion_tokens"],
                   "cache_read_input_tokens": cached, "cache_creation_input_tokens": 0}
        stop = "tool_use" if any(block["type"] == "tool_use" for block in blocks) else "end_turn"
        reply = {"id": f"msg_{len(self.chat.requests)}", "type": "message", "role": "assistant",
                 "model": body["model"], "content": blocks, "stop_reason": stop, "stop_sequence": None,
                 "usage": counted}
        if not body.get("stream"):
            self._json(reply)
            return
        self._event_stream()

        def send(event: dict[str, Any]) -> None:
            time.sleep(self.chat.pause)
            self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
            self.wfile.flush()
            self.chat.sent.append(time.perf_counter())

        send({"type": "message_start", "message": {**reply, "content": [], "stop_reason": None,
                                                   "usage": {**counted, "output_tokens": 1}}})
        for index, block in enumerate(blocks):
            for event in _block_events(block):
                send({**event, "index": index})
        send({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
              "usage": {"output_tokens": counted["output_tokens"]}})
        send({"type": "message_stop"})

    def _responses(self, body: dict[str, Any], message: dict[str, Any], usage: dict[str, Any]) -> None:
        """Answer in OpenAI's Responses form: the response whole, or streamed as its events."""
        items = message.pop("_items", None) or _items_of(message)
        cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
        number = len(self.chat.requests)
        response = {"id": f"resp_{number}", "object": "response", "created_at": 0, "status": "completed",
                    "model": body["model"], "output": items, "parallel_tool_calls": True, "tool_choice": "auto",
                    "tools": body.get("tools", []),
                    "usage": {"input_tokens": usage["prompt_tokens"], "input_tokens_details": {"cached_tokens": cached},
                              "output_tokens": usage["completion_tokens"],
                              "output_tokens_details": {"reasoning_tokens": 0},
                              "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]}}
        if not body.get("stream"):
            self._json(response)
            return
        self._event_stream()
        started = {**response, "status": "in_progress", "output": []}
        events: list[dict[str, Any]] = [{"type": "response.created", "response": started}]
        for index, item in enumerate(items):
            events.extend({**event, "output_index": index} for event in _item_events(item))
        events.append({"type": "response.completed", "response": response})
        for number, event in enumerate(events):
            time.sleep(self.chat.pause)
            self.wfile.write(f"event: {event['type']}\ndata: {json.dumps({**event, 'sequence_number': number})}\n\n"
                             .encode())
            self.wfile.flush()
            self.chat.sent.append(time.perf_counter())

    def _gemini(self, message: dict[str, Any], usage: dict[str, Any], streamed: bool) -> None:
        """Answer in Gemini's `generateContent` form: the response whole, or streamed as
        server-sent chunks (`streamGenerateContent?alt=sse`): the text a word at a time, each
        function call whole, the finish reason and usage with the last."""
        parts = message.pop("_parts", None) or _parts_of(message)
        model = self.path.rsplit("/", 1)[-1].split(":")[0]
        counted = {"promptTokenCount": usage["prompt_tokens"], "candidatesTokenCount": usage["completion_tokens"],
                   "totalTokenCount": usage["prompt_tokens"] + usage["completion_tokens"]}
        cached = int((usage.get("prompt_tokens_details") or {}).get("cachedContentTokenCount")
                     or (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
        if cached:
            counted["cachedContentTokenCount"] = cached

        def chunk(pieces: list[dict[str, Any]], last: bool) -> dict[str, Any]:
            candidate: dict[str, Any] = {"content": {"role": "model", "parts": pieces}, "index": 0}
            made: dict[str, Any] = {"candidates": [candidate], "modelVersion": model,
                                    "responseId": f"gemini-{len(self.chat.requests)}"}
            if last:
                candidate["finishReason"] = "STOP"
                made["usageMetadata"] = counted
            return made

        if not streamed:
            self._json(chunk(parts, last=True))
            return
        self._event_stream()
        pieces: list[list[dict[str, Any]]] = []
        for part in parts:
            if "text" in part and not part.get("thought"):
                pieces.extend([{**part, "text": word}] for word in re.findall(r"\S+\s*|\s+", part["text"]))
            else:
                pieces.append([part])
        for number, each in enumerate(pieces or [[]]):
            time.sleep(self.chat.pause)
            self.wfile.write(f"data: {json.dumps(chunk(each, last=number == max(len(pieces), 1) - 1))}\r\n\r\n"
                             .encode())
            self.wfile.flush()
            self.chat.sent.append(time.perf_counter())

    def _json(self, answer: dict[str, Any]) -> None:
        payload = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _event_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")  # a stream's end is the connection's: it has no length
        self.close_connection = True
        self.end_headers()

    def _refuse(self, said: str, status: int = 400) -> None:
        kind = "invalid_request_error" if status < 500 else "server_error"
        if self.path.endswith("/messages"):
            kind = "invalid_request_error" if status < 500 else "api_error"
            payload = json.dumps({"type": "error", "error": {"type": kind, "message": said}}).encode()
        else:
            payload = json.dumps({"error": {"message": said, "type": kind}}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


def _blocks_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A scripted chat-form message as Messages content blocks: its text, then its calls."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": message["content"]}] if message.get("content") else []
    for call in message.get("tool_calls") or ():
        arguments = call["function"]["arguments"]
        blocks.append({"type": "tool_use", "id": call["id"], "name": call["function"]["name"],
                       "input": json.loads(arguments) if arguments.strip() else {}})
    return blocks


def _block_events(block: dict[str, Any]) -> list[dict[str, Any]]:
    """A content block streamed as Anthropic streams it: its start (its text, thinking and
    input empty), its pieces (text a word at a time; thinking and its signature; the
    input's JSON in two pieces), its stop."""
    kind = block["type"]
    if kind == "text":
        pieces = [{"type": "text_delta", "text": word} for word in re.findall(r"\S+\s*|\s+", block["text"])]
        start = {**block, "text": ""}
    elif kind == "tool_use":
        arguments = json.dumps(block.get("input") or {})
        half = len(arguments) // 2
        pieces = [{"type": "input_json_delta", "partial_json": part} for part in (arguments[:half], arguments[half:])]
        start = {**block, "input": {}}
    elif kind == "thinking":
        pieces = [{"type": "thinking_delta", "thinking": block.get("thinking", "")},
                  {"type": "signature_delta", "signature": block.get("signature", "")}]
        start = {**block, "thinking": "", "signature": ""}
    else:
        pieces, start = [], block
    return [{"type": "content_block_start", "content_block": start},
            *({"type": "content_block_delta", "delta": piece} for piece in pieces),
            {"type": "content_block_stop"}]


def _items_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A scripted chat-form message as Responses output items: a message item with its text,
    then a function_call item per call."""
    items: list[dict[str, Any]] = []
    if message.get("content"):
        items.append({"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": message["content"], "annotations": []}]})
    for number, call in enumerate(message.get("tool_calls") or (), 1):
        items.append({"type": "function_call", "id": f"fc_{number}", "call_id": call["id"],
                      "name": call["function"]["name"], "arguments": call["function"]["arguments"],
                      "status": "completed"})
    return items


def _item_events(item: dict[str, Any]) -> list[dict[str, Any]]:
    """An output item streamed as the Responses API streams it: added (empty), its text a
    word at a time or its arguments in two pieces, done."""
    kind, ident = item.get("type"), item.get("id", "")
    if kind == "message":
        events: list[dict[str, Any]] = [{"type": "response.output_item.added", "item": {**item, "content": []}}]
        for index, part in enumerate(item.get("content") or ()):
            text = str(part.get("text") or "")
            events.append({"type": "response.content_part.added", "item_id": ident, "content_index": index,
                           "part": {**part, "text": ""}})
            events.extend({"type": "response.output_text.delta", "item_id": ident, "content_index": index,
                           "delta": word, "logprobs": []} for word in re.findall(r"\S+\s*|\s+", text))
            events.append({"type": "response.output_text.done", "item_id": ident, "content_index": index,
                           "text": text, "logprobs": []})
            events.append({"type": "response.content_part.done", "item_id": ident, "content_index": index,
                           "part": part})
        return [*events, {"type": "response.output_item.done", "item": item}]
    if kind == "function_call":
        arguments, half = item["arguments"], len(item["arguments"]) // 2
        return [{"type": "response.output_item.added", "item": {**item, "arguments": ""}},
                *({"type": "response.function_call_arguments.delta", "item_id": ident, "delta": piece}
                  for piece in (arguments[:half], arguments[half:])),
                {"type": "response.function_call_arguments.done", "item_id": ident, "arguments": arguments},
                {"type": "response.output_item.done", "item": item}]
    return [{"type": "response.output_item.added", "item": item}, {"type": "response.output_item.done", "item": item}]


def _parts_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A scripted chat-form message as Gemini parts: its text, then a functionCall per call."""
    parts: list[dict[str, Any]] = [{"text": message["content"]}] if message.get("content") else []
    for call in message.get("tool_calls") or ():
        arguments = call["function"]["arguments"]
        parts.append({"functionCall": {"id": call["id"], "name": call["function"]["name"],
                                       "args": json.loads(arguments) if arguments.strip() else {}}})
    return parts
