"""A real MCP server that asks its client's user in the middle of a tool call (elicitation),
asks the client's model for a completion (sampling) and says how far it got (progress),
built with the official SDK. What reaches it is appended to a ledger file, one JSON line
each, so a test can prove what the server was asked, what it was answered and what it did.

    python tests/mcp_asking_server.py LEDGER              (stdio)
    python tests/mcp_asking_server.py LEDGER http PORT    (streamable HTTP on 127.0.0.1)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    ElicitRequest,
    ElicitRequestFormParams,
    InputRequiredResult,
    SamplingMessage,
    TextContent,
)
from pydantic import BaseModel

LEDGER = Path(sys.argv[1])
server = MCPServer("asking")


def _note(**line: object) -> None:
    with LEDGER.open("a", encoding="utf-8") as ledger:
        ledger.write(json.dumps(line) + "\n")


class Confirm(BaseModel):
    confirm: bool


class Shipping(BaseModel):
    city: str
    copies: int


async def _asked(ctx: Context, message: str, form: type[BaseModel]) -> tuple[str, dict | None] | InputRequiredResult:
    """The user's answer (action, fields): asked in place on a connection that can send
    requests (protocol 2025-11-25 and before), by a round trip on one that cannot."""
    if ctx.protocol_version is not None and ctx.protocol_version >= "2026":
        replies = ctx.input_responses
        if replies is None or "ask" not in replies:
            ask = ElicitRequest(params=ElicitRequestFormParams(message=message,
                                                               requested_schema=form.model_json_schema()))
            return InputRequiredResult(input_requests={"ask": ask})
        reply = replies["ask"]
        return reply.action, reply.content
    answer = await ctx.elicit(message, form)
    return answer.action, answer.data.model_dump() if answer.action == "accept" else None


@server.tool()
async def transfer(to: str, amount: int, ctx: Context) -> str | InputRequiredResult:
    """Transfer money, once the user confirms it."""
    _note(called="transfer", to=to, amount=amount, protocol=ctx.protocol_version)
    asked = await _asked(ctx, f"Transfer {amount} to {to}?", Confirm)
    if isinstance(asked, InputRequiredResult):
        return asked
    action, data = asked
    _note(answered=action, data=data)
    if action != "accept" or not data or not data["confirm"]:
        return f"not transferred ({action})"
    _note(did="transfer", to=to, amount=amount)
    return f"transferred {amount} to {to}"


@server.tool()
async def ship(book: str, ctx: Context) -> str | InputRequiredResult:
    """Ship a book where the user says, as many copies as they say."""
    asked = await _asked(ctx, f"Where to, and how many copies of {book}?", Shipping)
    if isinstance(asked, InputRequiredResult):
        return asked
    action, data = asked
    if action != "accept" or not data:
        return f"not shipped ({action})"
    _note(did="ship", book=book, **data)
    return f"shipped {data['copies']} {book} to {data['city']}"


@server.tool()
async def summarize(text: str, ctx: Context) -> str | InputRequiredResult:
    """Summarize a text with the client's model (sampling)."""
    _note(called="summarize", text=text)
    asked = CreateMessageRequestParams(messages=[SamplingMessage(role="user", content=TextContent(
        type="text", text=f"Summarize: {text}"))], system_prompt="Be brief.", max_tokens=50)
    if ctx.protocol_version is not None and ctx.protocol_version >= "2026":
        replies = ctx.input_responses
        if replies is None or "sample" not in replies:
            return InputRequiredResult(input_requests={"sample": CreateMessageRequest(params=asked)})
        made = replies["sample"]
    else:
        made = await ctx.session.create_message(asked.messages, max_tokens=asked.max_tokens,
                                                system_prompt=asked.system_prompt)
    first = not LEDGER.exists() or '"sampled"' not in LEDGER.read_text()
    _note(sampled=made.content.text, model=made.model)
    if text.startswith("slowly") and first:  # the caller may be killed now: the sample had, the call not done
        import anyio

        await anyio.sleep(60)
    return f"summary: {made.content.text}"


@server.tool()
async def count(to: int, ctx: Context) -> int:
    """Count up to `to`, saying how far it got."""
    for done in range(1, to + 1):
        await ctx.report_progress(done, to, f"counted {done}")
    return to


if __name__ == "__main__":
    if sys.argv[2:3] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[3]))
    else:
        server.run("stdio")
