"""A real MCP server (the SDK's low-level Server) with one tool, `meta`, that answers with its
request's `_meta` as JSON: what a client propagated to it (the trace context).

    python tests/mcp_meta_server.py
"""

from __future__ import annotations

import json

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOLS = [types.Tool(name="meta", description="Answers with its request's _meta, as JSON.",
                    input_schema={"type": "object"})]


async def list_tools(context: object, params: object) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(context: object, params: types.CallToolRequestParams) -> types.CallToolResult:
    meta = params.meta if isinstance(params.meta, dict) else (params.meta.model_dump() if params.meta else {})
    return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(meta, default=str))])


server = Server("meta", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
