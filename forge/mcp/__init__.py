"""Tools from MCP servers (extra `forge[mcp]`, on the official `mcp` SDK).

An `MCPServer` connects to one server, over stdio (a command forge starts) or streamable
HTTP (a URL), and turns its tools into typed forge `Tool`s: name, description, the input
schema as the argument contract (so forge refuses a wrongly typed call before the server
sees it), and `side_effect` from the annotations (only a tool marked read-only is taken as
free of side effects).

MCP sessions are asynchronous and must live in one event loop, so the session runs in a
thread of its own; a tool's handler blocks on it under `run()` and is awaited under
`arun()`. The server is closed when the `with` block ends, however it ends: the session is
shut down and a stdio server's process is ended. An `MCPServer` left open is closed when it
is garbage-collected or when the interpreter exits.

    with MCPServer.stdio("mcp-server-time") as time_server:
        loop = AgentLoop(time_server.tools(), policy, verify)
        loop.run("what time is it in Tokyo?")
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import signal
import sys
import threading
import weakref
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO, TypedDict, Unpack

from forge.agent.retry import ToolError
from forge.errors import ForgeError, UsageError, refuse_unknown
from forge.mcp.asking import CURRENT, Elicit, Exchange
from forge.records.effects import can_await
from forge.records.trace import error_text
from forge.tools import Tool

try:
    import mcp
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.shared.exceptions import MCPError as SDKError
    from mcp_types import REQUEST_TIMEOUT
except ImportError as missing:  # pragma: no cover - exercised only without the extra
    raise ImportError("forge.mcp needs the MCP SDK: install forge with its mcp extra (pip install 'forge-fsm[mcp]') "
                      "or pip install mcp") from missing

__all__ = ["MCPError", "MCPServer", "ServerOptions"]


class ServerOptions(TypedDict, total=False):
    """The options `MCPServer.stdio` and `MCPServer.http` pass on to `MCPServer(...)` as
    they are (each as `MCPServer` says; left out, its default): `name`, `timeout` (60 s),
    `start_timeout` (`timeout`), `elicit` (None) and `protocol` ("auto")."""

    name: str | None
    timeout: float
    start_timeout: float | None
    elicit: Elicit | None
    protocol: str


class MCPError(ForgeError, RuntimeError):
    """The server could not be started, connected to, listed or closed; the message says
    which server and why."""


class MCPServer:
    """One MCP server. Use it as a context manager (or `open()` and `close()`).

    `timeout` bounds each call, in seconds; `start_timeout` bounds starting the server,
    connecting and listing its tools (default: `timeout`). A server that is slow to start
    (an interpreter importing a large SDK on a busy machine) but must answer calls quickly
    wants a short `timeout` and a longer `start_timeout`.

    What the server asks while it runs a tool (elicitation) is the calling run's question,
    and what it tells of its progress is the run's stream's (`forge.mcp.asking`); `elicit`
    answers its questions where nobody answers the run (a run in memory, a call made
    outside any run): `elicit(question)` returns a mapping of the form's fields, their
    text, or None to decline. `timeout` counts the server's time, not a person's.
    `protocol` is how the protocol's version is agreed: "auto" (the newest both speak),
    "legacy" (the initialize handshake of 2025-11-25 and before), or a version to adopt.

    Raises:
        MCPError: from `open()`, the server could not be started or connected to.
    """

    def __init__(self, server: StdioServerParameters | str, *, name: str | None = None, timeout: float = 60.0,
                 errlog: TextIO | None = None, start_timeout: float | None = None, elicit: Elicit | None = None,
                 protocol: str = "auto") -> None:
        for label, seconds in (("timeout", timeout), ("start_timeout", start_timeout)):
            if seconds is not None and not seconds > 0:
                raise MCPError(f"MCPServer {label} must be a positive number of seconds, not {seconds!r}")
        self.server = server
        self.errlog = errlog
        self.name = name or (server if isinstance(server, str) else " ".join([server.command, *server.args]))
        self.timeout = timeout
        self.start_timeout = timeout if start_timeout is None else start_timeout
        self.elicit, self.protocol = elicit, protocol
        self._session: _Session | None = None
        self._listing: tuple[Any, ...] = ()
        self._finalizer: weakref.finalize[[], MCPServer] | None = None

    @classmethod
    def stdio(cls, command: str, *args: str, env: Mapping[str, str] | None = None, cwd: str | Path | None = None,
              errlog: TextIO | None = None, **options: Unpack[ServerOptions]) -> MCPServer:
        """A server forge starts as `command args…`, speaking MCP on its stdin and stdout.

        `env` is added to a minimal default environment (the SDK's); what the server writes
        to stderr goes to `errlog`, a real file (default: this process's own stderr). The
        `options` (`ServerOptions`) are `MCPServer`'s.

        Raises:
            TypeError: an option `MCPServer` does not take (named).
        """
        refuse_unknown(options, ServerOptions, "MCPServer.stdio", ("env", "cwd", "errlog"))
        parameters = StdioServerParameters(command=command, args=list(args), env=dict(env) if env is not None else None,
                                           cwd=str(cwd) if cwd is not None else None)
        return cls(parameters, errlog=errlog, **options)

    @classmethod
    def http(cls, url: str, **options: Unpack[ServerOptions]) -> MCPServer:
        """A server already listening for streamable HTTP at `url` (e.g.
        http://127.0.0.1:8000/mcp); the `options` (`ServerOptions`) are `MCPServer`'s.

        Raises:
            TypeError: an option `MCPServer` does not take (named).
        """
        refuse_unknown(options, ServerOptions, "MCPServer.http")
        return cls(url, **options)

    # lifecycle

    def __enter__(self) -> MCPServer:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def is_open(self) -> bool:
        return self._session is not None and self._session.client is not None

    def open(self) -> MCPServer:
        """Start (stdio) or reach (HTTP) the server, and list its tools. Opening an open
        server does nothing.

        Raises:
            MCPError: it could not be started, connected to or listed within `start_timeout`.
        """
        if self.is_open:
            return self
        session = self._session = _Session(self.name)
        ready: concurrent.futures.Future[tuple[Any, ...]] = concurrent.futures.Future()
        before = _children() if not isinstance(self.server, str) else set()
        session.start(_transport(self.server, self.errlog), self.start_timeout, ready, self.protocol)
        try:
            self._listing = ready.result(self.start_timeout)
        except BaseException as error:
            self.close()
            if not isinstance(self.server, str):  # a server the transport could not end: none survives a failed open
                _kill(pid for pid in _children() - before if _command_of(pid) == [self.server.command, *self.server.args])
            if isinstance(error, concurrent.futures.TimeoutError):
                raise MCPError(f"MCP server {self.name!r} did not start within {self.start_timeout:g} s") from None
            raise MCPError(f"MCP server {self.name!r} could not be started or reached: {_describe(error)}") from error
        self._finalizer = weakref.finalize(self, session.stop)
        return self

    def close(self) -> None:
        """End the session and, for stdio, the server process; then stop the thread.
        Closing a closed server does nothing."""
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self._session is not None:
            self._session.stop()
            self._session = None

    # tools

    @property
    def listing(self) -> tuple[Any, ...]:
        """The server's tools as MCP describes them (`mcp_types.Tool`), as listed on open."""
        return self._listing

    def tools(self, *, capabilities: Mapping[str, Iterable[str]] | None = None,
              prefix: str = "", include: Iterable[str] | None = None) -> list[Tool]:
        """The server's tools as forge Tools, calling through this server's session.

        `capabilities` maps a tool's name to its capabilities (default: its name);
        `prefix` is put before every name (two servers with a tool of the same name);
        `include` keeps only the named tools.

        Raises:
            MCPError: the server is not open.
            ValueError: `include` names a tool the server does not have.
        """
        self._require_open()
        chosen = self._listing
        if include is not None:
            wanted = set(include)
            unknown = wanted - {t.name for t in chosen}
            if unknown:
                raise UsageError(f"MCP server {self.name!r} has no tool {', '.join(sorted(unknown))}; "
                                 f"it has {', '.join(t.name for t in chosen)}")
            chosen = tuple(t for t in chosen if t.name in wanted)
        given = capabilities or {}
        made = []
        for t in chosen:
            try:
                made.append(Tool(f"{prefix}{t.name}", given.get(t.name, {f"{prefix}{t.name}"}), _MCPCall(self, t.name),
                                 side_effect=not bool(t.annotations and t.annotations.read_only_hint),
                                 description=t.description or "", schema=t.input_schema, inline=True))
            except UsageError as refused:
                others = [other.name for other in chosen if other.name != t.name]
                raise UsageError(f"MCP server {self.name!r}: {refused}; leave that tool out with "
                                 f"tools(include={others!r})") from None
        return made

    def call(self, tool: str, arguments: Mapping[str, Any]) -> Any:
        """Call `tool` and wait for its result: the structured content when the server gives
        one, else the text of its content blocks.

        Raises:
            ToolError: the server answered with `isError`; the message is the server's text.
            MCPError: the server is not open.
            TimeoutError: no answer within `timeout`.
        """
        exchange = Exchange(self.name, tool, arguments, self.elicit)
        future = self._submit(tool, arguments, exchange)
        try:
            return _result_of(exchange.wait(future, self.timeout))
        except (TimeoutError, SDKError) as error:
            raise self._timed_out(tool, future, error) from None

    async def acall(self, tool: str, arguments: Mapping[str, Any]) -> Any:
        """`call`, awaited from any event loop (the session stays in its own)."""
        exchange = Exchange(self.name, tool, arguments, self.elicit, asyncio.get_running_loop())
        future = self._submit(tool, arguments, exchange)
        try:
            return _result_of(await exchange.await_(future, self.timeout))
        except (TimeoutError, SDKError) as error:
            raise self._timed_out(tool, future, error) from None

    def _timed_out(self, tool: str, future: concurrent.futures.Future[Any], error: Exception) -> Exception:
        """What a call that failed with `error` raises: the same TimeoutError whether this
        side's wait or the SDK's own request timeout (the call's read timeout, the same
        length) ran out first, the call cancelled and the session still usable; any other
        error of the SDK as it is."""
        if isinstance(error, SDKError) and error.code != REQUEST_TIMEOUT:
            return error
        future.cancel()
        return TimeoutError(f"MCP server {self.name!r} did not answer {tool} within {self.timeout:g} s")

    def _submit(self, tool: str, arguments: Mapping[str, Any], exchange: Exchange) -> concurrent.futures.Future[Any]:
        self._require_open()
        session = self._session
        assert session is not None and session.loop is not None
        meta = trace_context()  # read here: the session's loop runs in another thread, outside the caller's context
        return asyncio.run_coroutine_threadsafe(session.call(tool, dict(arguments), exchange, meta), session.loop)

    def _require_open(self) -> None:
        if not self.is_open:
            raise MCPError(f"MCP server {self.name!r} is not open: use `with MCPServer…(...) as server:` or open()")

    def __repr__(self) -> str:
        return f"MCPServer({self.name!r}, {'open' if self.is_open else 'closed'})"


class _MCPCall:
    """A tool's handler: blocks under `run()` (even where an event loop runs, as in Jupyter),
    returns an awaitable under `arun()`, so one Tool serves both. Its tools are `inline`:
    under `arun()` the handler is called in the event loop's thread, where the awaitable is
    made (no worker thread), and a durable run's wait for a person, asked from there, is the
    workflow's own."""

    def __init__(self, server: MCPServer, tool: str) -> None:
        self.server, self.tool = server, tool
        self.__name__ = tool

    def __call__(self, **arguments: Any) -> Any:
        if not can_await():  # run(), even in a thread whose event loop runs (Jupyter): block on the session
            return self.server.call(self.tool, arguments)
        return self.server.acall(self.tool, arguments)

    def __repr__(self) -> str:
        return f"<MCP tool {self.tool!r} of {self.server.name!r}>"


def _result_of(result: Any) -> Any:
    text = "\n".join(getattr(block, "text", "") for block in result.content if getattr(block, "type", "") == "text")
    if result.is_error:
        raise ToolError(text or "the MCP server reported an error without a message")
    if result.structured_content is not None:
        return result.structured_content
    if all(getattr(block, "type", "") == "text" for block in result.content):
        return text
    return [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content]


class _Session:
    """One live MCP session: its event loop, the thread running it, and the task that holds
    the client open. Kept apart from `MCPServer` so that nothing running refers to the
    server object, and a forgotten server can be collected (and its session stopped)."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=f"forge-mcp {name}", daemon=True)
        self.client: Any = None
        self.closing: asyncio.Event | None = None
        self.served: concurrent.futures.Future[None] | None = None
        self.task: asyncio.Task[None] | None = None
        self.calls: set[Exchange] = set()
        """The calls in flight: where a request made in place (no call's context) belongs."""

    async def call(self, tool: str, arguments: dict[str, Any], exchange: Exchange, meta: dict[str, str]) -> Any:
        """The call of `tool`, in its own task: what the server asks or tells during it goes
        to `exchange`. The SDK's own read timeout is off: the caller's counts the server's
        time without a person's."""
        CURRENT.set(exchange)
        self.calls.add(exchange)
        try:
            return await self.client.call_tool(tool, arguments, read_timeout_seconds=None,
                                               progress_callback=exchange.progressed, **({"meta": meta} if meta else {}))
        finally:
            self.calls.discard(exchange)

    async def elicited(self, context: Any, params: Any) -> Any:
        """The session's elicitation callback: the question goes to the call it belongs to."""
        exchange = self._exchange()
        return await exchange.asked(params) if exchange is not None else self._unplaced(f"asks {params.message!r}")

    async def sampled(self, context: Any, params: Any) -> Any:
        """The session's sampling callback: the request goes to the call it belongs to,
        made through its run's model."""
        exchange = self._exchange()
        return await exchange.sampled(params) if exchange is not None else self._unplaced("asks for a completion")

    def _exchange(self) -> Exchange | None:
        """The call a server's request belongs to: the one whose task made it (a round
        trip), else the only call in flight."""
        exchange = CURRENT.get()
        if exchange is None and len(self.calls) == 1:
            exchange = next(iter(self.calls))
        return exchange

    def _unplaced(self, what: str) -> Any:
        from mcp_types import INVALID_REQUEST, ErrorData

        return ErrorData(code=INVALID_REQUEST, message=(
            f"forge cannot tell which of its {len(self.calls)} calls in flight {what}: a request made in place "
            "carries no link to its call (open one session per concurrent caller)"))

    def start(self, server: Any, timeout: float, ready: concurrent.futures.Future[tuple[Any, ...]],
              protocol: str = "auto") -> None:
        self.thread.start()
        self.served = asyncio.run_coroutine_threadsafe(self._serve(server, timeout, ready, protocol), self.loop)

    async def _serve(self, server: Any, timeout: float, ready: concurrent.futures.Future[tuple[Any, ...]],
                     protocol: str) -> None:
        """The session's whole life, in one task: anyio's scopes must end where they began."""
        self.closing = asyncio.Event()
        self.task = asyncio.current_task()
        try:
            async with mcp.Client(server, read_timeout_seconds=timeout, elicitation_callback=self.elicited,
                                  sampling_callback=self.sampled, mode=protocol) as client:
                listing: list[Any] = []
                cursor = None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    listing.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
                self.client = client
                ready.set_result(tuple(listing))
                await self.closing.wait()
        except BaseException as error:
            if not ready.done():
                ready.set_exception(error)
                return
            raise
        finally:
            self.client = None

    async def _cancel(self) -> None:
        await _cancelled(self.task)

    def stop(self, timeout: float = 10.0) -> None:
        """Close the client (ending a stdio server's process), then the loop and thread."""
        loop = self.loop
        if loop.is_closed():
            return
        if self.client is None and self.served is not None and not self.served.done():
            # never ready (a server that does not answer): cancel the handshake, and wait while
            # the transport ends the server's process or connection
            with contextlib.suppress(BaseException):
                asyncio.run_coroutine_threadsafe(self._cancel(), loop).result(timeout)
        if self.closing is not None:
            loop.call_soon_threadsafe(self.closing.set)
        if self.served is not None:
            with contextlib.suppress(BaseException):  # a session that failed has nothing left to close
                self.served.result(timeout)
        loop.call_soon_threadsafe(loop.stop)
        self.thread.join(timeout)
        if not self.thread.is_alive():
            loop.close()


async def _cancelled(task: asyncio.Task[None] | None) -> None:
    """Cancel `task` and wait until it has ended (its cleanup included)."""
    if task is None or task.done():
        return
    task.cancel()
    with contextlib.suppress(BaseException):
        await task


def _children() -> set[int]:
    """This process's child processes, from /proc (Linux; elsewhere none are known)."""
    found: set[int] = set()
    me = os.getpid()
    try:
        entries = [entry.name for entry in os.scandir("/proc") if entry.name.isdigit()]
    except OSError:
        return found
    for name in entries:
        try:
            with open(f"/proc/{name}/stat", encoding="utf-8", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and fields[1] == str(me):
            found.add(int(name))
    return found


def _command_of(pid: int) -> list[str]:
    """The command line process `pid` was started with (empty when it cannot be read)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return [part.decode("utf-8", "replace") for part in cmdline.read().split(b"\0") if part]
    except OSError:
        return []


def _kill(pids: Iterable[int]) -> None:
    """SIGKILL each of `pids` still running (and reap it, so it leaves no zombie)."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)


def _transport(server: StdioServerParameters | str, errlog: TextIO | None) -> Any:
    """What `mcp.Client` connects to: a URL as it is; a command as the SDK's stdio transport
    with the server's stderr sent to a real file (a captured `sys.stderr` may have none)."""
    if isinstance(server, str):
        return server
    return stdio_client(server, errlog=errlog if errlog is not None else _real_stderr())


def _real_stderr() -> TextIO:
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (AttributeError, OSError, ValueError):
            continue
    return open(os.devnull, "w")


def _describe(error: BaseException) -> str:
    inner = getattr(error, "exceptions", None)  # anyio raises ExceptionGroups
    if inner:
        return "; ".join(_describe(e) for e in inner)
    return error_text(error)


def trace_context() -> dict[str, str]:
    """The caller's OpenTelemetry trace context as W3C `traceparent` / `tracestate` entries,
    for a tool call's `params._meta`, as the MCP semantic conventions say: the server's
    spans then join the run's trace under the `execute_tool` span. Empty when OpenTelemetry
    is not installed or no span is current."""
    try:
        from opentelemetry import propagate
    except ImportError:
        return {}
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier
