"""The MCP SDK's own client calling one tool, answering the server's elicitations from a
list: what the tests of `forge serve` ask a served loop with."""

from __future__ import annotations

from typing import Any

import anyio
import mcp
import mcp_types as types


def call_answering(server: Any, tool: str, arguments: dict, replies: list, mode: str = "auto") -> tuple[Any, list]:
    """Call `tool` on `server` (anything `mcp.Client` takes: a process to start, an
    in-process server) with a client that answers with `replies` in turn, an
    `(action, content)` pair each; with no replies, a client that declares no elicitation.
    The result and the elicitations it was sent. `mode` "legacy" speaks the protocol before
    2026-07-28, where the server asks in place; the default, the newest, where it asks by
    round trips."""
    asked: list = []

    async def answer(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        action, content = replies[len(asked) - 1]
        return types.ElicitResult(action=action, content=content)

    async def session() -> Any:
        async with mcp.Client(server, read_timeout_seconds=60, elicitation_callback=answer if replies else None,
                              mode=mode) as client:
            return await client.call_tool(tool, arguments)

    return anyio.run(session), asked
