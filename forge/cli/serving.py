"""The commands that serve: `forge serve` (loops as MCP tools, or one loop over A2A or AG-UI),
`forge ui` (the web app over the runs database) and `forge tools` (an MCP server's tools as
forge sees them)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from forge.cli.arguments import port
from forge.cli.exits import one_line
from forge.errors import UsageError

__all__ = ["serve_command", "tools_command", "ui_command"]


def serve_command(commands: Any) -> None:
    serve = commands.add_parser("serve", help="serve loops as MCP tools, over stdio (default) or streamable HTTP; "
                                              "or one loop over A2A or AG-UI")
    serve.add_argument("loops", nargs="+", metavar="MODULE:LOOP",
                       help="an AgentLoop (served as the tool LOOP, taking a goal), or a tool loop.as_tool(...) made")
    serve.add_argument("--http", action="store_true", help="serve over streamable HTTP at http://HOST:PORT/mcp")
    serve.add_argument("--host", default="127.0.0.1", help="with --http, --a2a or --ag-ui (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="with --http, --a2a or --ag-ui (default 8000)")
    serve.add_argument("--name", default="forge", help="the server's name, as clients see it (default forge)")
    serve.add_argument("--a2a", action="store_true",
                       help="serve the one loop as an A2A agent at http://HOST:PORT/ instead (extra a2a)")
    serve.add_argument("--ag-ui", action="store_true",
                       help="serve the one loop as an AG-UI backend at http://HOST:PORT/ instead (extra ag-ui)")
    serve.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    from forge.machine.catalog import import_reference

    if args.a2a or args.ag_ui:
        return _serve_protocol(args)
    try:
        from forge.serve import serve_http, serve_stdio, served_durables, served_tools
    except ImportError as missing:
        raise UsageError(f"forge serve needs the mcp extra: pip install 'forge-fsm[mcp]' ({missing})") from None
    named = {reference.rpartition(":")[2]: import_reference(reference, "forge serve", "examples/writer.py:writer")
             for reference in args.loops}
    tools, durables = served_tools(named), served_durables(named)
    if args.http:
        print(f"forge serve: {', '.join(t.name for t in tools)} at http://{args.host}:{args.port}/mcp", flush=True)
        serve_http(tools, args.host, args.port, args.name, durables)
        return 0
    import anyio

    anyio.run(serve_stdio, tools, args.name, durables)
    return 0


def _serve_protocol(args: argparse.Namespace) -> int:
    """`forge serve --a2a` / `--ag-ui`: one loop (an AgentLoop, or a durable one for the
    workers) as an A2A agent or an AG-UI backend at http://HOST:PORT/."""
    from forge.machine.catalog import import_reference

    if args.a2a and args.ag_ui:
        raise UsageError("forge serve speaks one protocol at a time: --a2a or --ag-ui, not both")
    if args.http:
        raise UsageError("--http serves MCP; --a2a and --ag-ui serve over HTTP already: leave --http out")
    if len(args.loops) != 1:
        raise UsageError(f"forge serve --{'a2a' if args.a2a else 'ag-ui'} serves one loop, got {len(args.loops)}")
    loop = import_reference(args.loops[0], "forge serve", "examples/writer.py:writer")
    if not hasattr(getattr(loop, "loop", loop), "definition"):
        raise UsageError(f"{args.loops[0]} is not an AgentLoop (nor a durable one): forge serve --a2a and --ag-ui "
                         "serve a loop")
    import uvicorn

    url = f"http://{args.host}:{args.port}/"
    if args.a2a:
        from forge.protocols.a2a import a2a_app

        app, said = a2a_app(loop, url, name=None), f"over A2A at {url} (its card: {url}.well-known/agent-card.json)"
    else:
        from forge.protocols.ag_ui import ag_ui_app

        app, said = ag_ui_app(loop), f"over AG-UI at {url} (POST a RunAgentInput)"
    print(f"forge serve: {args.loops[0]} {said}", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


def ui_command(commands: Any) -> None:
    ui = commands.add_parser("ui", help="a local web app over the runs database: runs, live runs, answers")
    ui.add_argument("--db", help="the runs database: a SQLite path or a postgresql:// URL (default forge-runs.sqlite)")
    ui.add_argument("--port", type=port, default=8765, help="the port (default 8765; 0: any free one)")
    ui.add_argument("--host", default="127.0.0.1", help="the address to bind (default 127.0.0.1: this machine only)")
    ui.add_argument("--read-only", action="store_true", help="serve no action at all: look, never answer")
    ui.set_defaults(handler=_ui, error_code=2)


def _ui(args: argparse.Namespace) -> int:
    from forge.ui import serve

    serve(args.db, host=args.host, port=args.port, read_only=args.read_only,
          say=lambda line: print(line, flush=True))
    return 0


def tools_command(commands: Any) -> None:
    tools = commands.add_parser("tools", help="list an MCP server's tools as forge sees them",
                                usage="forge tools [--url URL] [-- COMMAND ARGS...]")
    tools.add_argument("--url", help="a streamable-HTTP MCP server's URL, instead of a command")
    tools.add_argument("command", nargs=argparse.REMAINDER, help="the stdio MCP server to start, after --")
    tools.set_defaults(handler=_tools)


def _tools(args: argparse.Namespace) -> int:
    from forge.mcp import MCPError, MCPServer

    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if bool(command) == bool(args.url):
        raise UsageError("name one MCP server: forge tools -- COMMAND ARGS..., or forge tools --url URL")
    server = MCPServer.http(args.url) if args.url else MCPServer.stdio(command[0], *command[1:])
    shown: list[str] = []
    try:
        with server:
            for listed in server.listing:  # one by one: a tool forge cannot use is listed, flagged
                try:
                    shown.extend(tool.summary() for tool in server.tools(include=[listed.name]))
                except UsageError as refused:
                    why = str(refused).split(": ", 1)[-1].split("; leave that tool out", 1)[0]
                    shown.append(f"{listed.name} — INVALID SCHEMA, forge cannot call it: {why}")
    except MCPError as error:
        print(f"forge: error: {one_line(str(error))}", file=sys.stderr)
        return 1
    print(f"{server.name}: {len(shown)} tool{'s' if len(shown) != 1 else ''}")
    for line in shown:
        print(line)
    return 0
