"""A real MCP server for tests, built with the official SDK: every call it receives is
appended to a ledger file, so a test can prove what reached the server.

    python tests/mcp_ledger_server.py LEDGER stdio
    python tests/mcp_ledger_server.py LEDGER http PORT      (streamable HTTP on 127.0.0.1)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

LEDGER = Path(sys.argv[1])
server = MCPServer("ledger")


def _note(tool: str, arguments: dict) -> None:
    with LEDGER.open("a", encoding="utf-8") as ledger:
        ledger.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    _note("add", {"a": a, "b": b})
    return a + b


@server.tool()
def shout(words: list[str]) -> str:
    """Upper-case each word and join them."""
    _note("shout", {"words": words})
    return " ".join(word.upper() for word in words)


@server.tool()
def divide(a: float, b: float) -> float:
    """Divide a by b; dividing by zero is an error the caller is told about."""
    _note("divide", {"a": a, "b": b})
    if b == 0:
        raise ToolError("cannot divide by zero")
    return a / b


if __name__ == "__main__":
    if sys.argv[2] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[3]))
    else:
        server.run("stdio")
