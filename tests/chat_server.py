"""A chat-completions endpoint on 127.0.0.1 for tests: it answers with scripted assistant
messages, in order, and keeps every request body, so a test can drive the real `openai`
client and check exactly what it sent."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


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
    the usage its response reports (default: 1 and 1)."""

    def __init__(self, script: list[dict[str, Any]] | Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.requests.append(body)
                    message = server._next(body)
                message = dict(message)
                usage = message.pop("_usage", None) or {"prompt_tokens": 1, "completion_tokens": 1}
                usage = {**usage, "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]}
                finish = "tool_calls" if message.get("tool_calls") else "stop"
                payload = json.dumps({
                    "id": f"chatcmpl-{len(server.requests)}", "object": "chat.completion", "created": 0,
                    "model": body["model"],
                    "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                    "usage": usage,
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    def _next(self, body: dict[str, Any]) -> dict[str, Any]:
        if callable(self.script):
            return self.script(body)
        if not self.script:
            raise AssertionError("the model was asked more often than scripted")
        return self.script.pop(0)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()
