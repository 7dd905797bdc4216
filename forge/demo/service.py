"""A small, really flaky HTTP service on 127.0.0.1 that the demo's agent depends on.

`POST /analyse` with `{"text": …}` answers `{"title": …, "words": …}`, except that the first
`failures` requests get `503 Service Unavailable` with a `Retry-After` header (and with
`failures=None` every request does: the service stays down). It listens on an ephemeral
port and stops when the `with` block ends.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from forge.errors import UsageError

__all__ = ["AnalysisService", "analyse_text"]


def analyse_text(text: str) -> dict[str, Any]:
    """The analysis itself: the first `# ` heading (or the first line) and the word count."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    heading = next((line[2:].strip() for line in lines if line.startswith("# ")), lines[0] if lines else "")
    return {"title": heading, "words": len(text.split())}


class AnalysisService:
    """The service, as a context manager: `with AnalysisService(failures=2) as service: service.url`."""

    def __init__(self, failures: int | None = 2, retry_after: int = 1) -> None:
        self.failures = failures
        self.retry_after = retry_after
        self.requests = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise UsageError("the service is not running; use it inside `with`")
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}"

    def _should_fail(self) -> bool:
        with self._lock:
            self.requests += 1
            return self.failures is None or self.requests <= self.failures

    def start(self) -> AnalysisService:
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                if self.path != "/analyse":
                    self._reply(404, {"error": f"no such endpoint {self.path}"})
                    return
                length = int(self.headers.get("Content-Length", "0"))
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                    text = body["text"]
                    if not isinstance(text, str):
                        raise TypeError
                except (ValueError, KeyError, TypeError):
                    self._reply(400, {"error": 'expected a JSON body {"text": "..."}'})
                    return
                if service._should_fail():
                    self._reply(503, {"error": "warming up"}, {"Retry-After": str(service.retry_after)})
                    return
                self._reply(200, analyse_text(text))

            def _reply(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="forge-demo-service", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> AnalysisService:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
