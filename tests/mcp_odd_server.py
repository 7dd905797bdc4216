"""A real MCP server (the SDK's low-level Server) whose tools' schemas forge must cope with:
`good` has a valid input schema, `bad` one that is not valid JSON Schema, and `slow` never
answers.

    python tests/mcp_odd_server.py
"""

from __future__ import annotations

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOLS = [
    types.Tool(name="good", description="A tool with a valid schema.",
               input_schema={"type": "object", "properties": {"x": {"type": "string"}}}),
    types.Tool(name="bad", description="A tool whose schema is not valid JSON Schema.",
               input_schema={"type": "object", "properties": {"x": {"type": "strnig"}}}),
    types.Tool(name="slow", description="A tool that never answers.", input_schema={"type": "object"}),
]


async def list_tools(context: object, params: object) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(context: object, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == "slow":
        await anyio.sleep(3600)
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"{params.name} ran")])


server = Server("odd", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
