"""`forge serve MODULE:LOOP`: forge loops served as MCP tools, to any MCP client.

A desktop assistant, an IDE or another framework calls tools over MCP; served, a forge loop is
one of them. Each served loop is the tool `as_tool` makes of it (`AgentLoop.as_tool`): its
input schema is `{"goal": "..."}`, or the `input=` of a tool given instead of a loop; a call
runs the loop on that goal and its result is the run's answer (as text, JSON for anything but
a string, and as structured content when the loop has `output=`). While the run goes on,
each transition fired is a progress notification (`progress` counts transitions, `message`
says `source -trigger-> dest`) to a client that asked for progress. A run that does not end in
success is an error result naming its stop reason, its error or its question.

A run that waits for a person (a `forge.Ask` question, an approval its approver leaves to a
person, a tie or a capability gap; a child run's too, `AgentLoop.as_tool`) asks the MCP
client's user through elicitation when the client supports it, in place or by round trips
as the client's protocol allows (`forge.serve.asking`): the answer goes on in the same run.
A client without elicitation gets an error result saying where the run waits and what it asks.

Served over stdio (`serve_stdio`, what a client starts as a subprocess) or streamable HTTP
(`serve_http`), with the official `mcp` SDK's low-level server (extra `forge-fsm[mcp]`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from forge.errors import UsageError
from forge.machine.start import RunStart
from forge.records.answers import Waiting
from forge.serve.asking import Eliciting, NeedsInput, Round, Unanswered, answer_of, form_for, opened, sealed

__all__ = ["mcp_server", "serve_http", "serve_stdio", "served_durables", "served_tools"]


def served_tools(named: Mapping[str, Any]) -> list[Any]:
    """The tools to serve, from what each name refers to: an `AgentLoop` is served as
    `loop.as_tool(name)`, a tool `as_tool` made is served as it is.

    Raises:
        UsageError: a name refers to neither, or two tools share a name.
    """
    from forge.tools import Tool

    tools: list[Tool] = []
    for name, value in named.items():
        if isinstance(value, Tool) and value.child is not None:
            tools.append(value)
        elif isinstance(value, Tool):
            raise UsageError(f"{name!r} is a tool that runs no loop; forge serve serves loops (an AgentLoop, or "
                             "the tool loop.as_tool(...) makes)")
        elif hasattr(value, "as_tool") and hasattr(value, "definition"):
            tools.append(value.as_tool(name))
        elif _is_durable(value):
            tools.append(value.loop.as_tool(name))
        else:
            raise UsageError(f"{name!r} is a {type(value).__name__}, not an AgentLoop, a durable loop "
                             "(loop.durable(...)) or a tool loop.as_tool made")
    names = [tool.name for tool in tools]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise UsageError(f"two served tools share the name {', '.join(repeated)}")
    return tools


def served_durables(named: Mapping[str, Any]) -> dict[str, Any]:
    """The durable loops among what the names refer to (`loop.durable(...)`), by the name of
    the tool each is served as: a call of one is a durable run (see `mcp_server`)."""
    return {name: value for name, value in named.items() if _is_durable(value)}


def _is_durable(value: Any) -> bool:
    """Whether `value` is a loop's `Durable` (duck-typed: forge.durable needs the durable extra)."""
    return hasattr(value, "resume") and hasattr(value, "loop") and hasattr(value, "runs")


def mcp_server(tools: Sequence[Any], name: str = "forge", durables: Mapping[str, Any] | None = None) -> Any:
    """An MCP server (`mcp.server.lowlevel.Server`) offering `tools` (from `served_tools`).

    A tool named in `durables` (`served_durables`) runs its loop durably: a call is a run in
    the durable loop's database, and a question it waits on is asked of the client's user
    as any served run's is; by round trips, the request state carries only the run's id (the
    database has the rest), so the run is resumed by the retried call, by this server or, on
    a client that keeps the state, after it restarts — and, answered elsewhere (`forge runs
    answer`, `forge ui`), it goes on there. A client that cannot be asked gets an error result
    naming the run, where it waits, and how to answer it."""
    durables = dict(durables or {})
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import Server

    by_name = {tool.name: tool for tool in tools}
    listing = [types.Tool(name=tool.name, description=tool.description, input_schema=dict(tool.schema or {}),
                          **_output_schema(tool)) for tool in tools]

    async def list_tools(context: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=listing)

    async def call_tool(context: Any, params: Any) -> Any:
        tool = by_name.get(params.name)
        if tool is None:
            return _error(types, f"no tool named {params.name!r}; this server has {', '.join(sorted(by_name))}")
        arguments = dict(params.arguments or {})
        refused = _refusal(tool, arguments)
        if refused:
            return _error(types, refused)
        from forge.machine.child import goal_of

        loop, goal = tool.child, goal_of(tool.schema, arguments)
        if not goal.strip():
            return _error(types, f"{tool.name}: the goal is blank; give the tool a goal to work on")
        session = context.session
        fired = [0]

        async def told(record: Any) -> None:
            fired[0] += 1
            await session.report_progress(fired[0], None, f"{record.source} -{record.trigger}-> {record.dest}")

        if tool.name in durables:
            try:
                return await _durably(context, params, tool, durables[tool.name], goal)
            except Unanswered as unanswered:
                return _error(types, str(unanswered))
        try:
            round = _round(params, goal, loop.codec)
        except Unanswered as unanswered:
            return _error(types, str(unanswered))
        performer = _asker(context, round, anyio.from_thread.run if not loop.asynchronous else None)
        try:
            if loop.asynchronous:
                import asyncio

                pending: list[Any] = []
                result = await loop.arun(RunStart(goal, run_id=round.run_id, performer=performer),
                                         on_transition=lambda record: pending.append(
                                             asyncio.ensure_future(told(record))))
                await asyncio.gather(*pending)
            else:
                result = await anyio.to_thread.run_sync(
                    lambda: loop.run(RunStart(goal, run_id=round.run_id, performer=performer),
                                     on_transition=lambda record: anyio.from_thread.run(told, record)))
        except Unanswered as unanswered:
            return _error(types, str(unanswered))
        except NeedsInput as needed:
            return _input_required(types, needed.waiting, round.encode(needed, loop.codec))
        return _result(types, tool, result)

    return Server(name, on_list_tools=list_tools, on_call_tool=call_tool)


async def _durably(context: Any, params: Any, tool: Any, durable: Any, goal: str) -> Any:
    """A call of a durable loop: a durable run, started (or, for a retried call, resumed
    with the client's reply), its questions asked of the client's user while it waits."""
    import anyio
    import mcp_types as types

    from forge.durable.answers import Answer

    session = context.session
    retried = _retried(params)
    if retried is not None:
        body, reply = opened(retried[0], tool.name), retried[1]
        waiting = Waiting.from_json(body["waiting"])
        answer = Answer.from_json(answer_of(waiting, reply)).to(waiting)
        told = _Told(session, durable, body["durable"], int(body.get("told", 0)))
        result = await told.during(durable.resume, body["durable"], answer)
    else:
        run_id = await anyio.to_thread.run_sync(durable.start, goal)
        told = _Told(session, durable, run_id)
        result = await told.during(durable.wait, run_id)
    while result.status == "waiting" and result.waiting is not None:
        waiting = result.waiting
        if not _elicits(session):
            commands = " or ".join(waiting.commands(result.run_id, durable.db))
            return _error(types, f"the durable run {result.run_id} waits in {waiting.state}: {waiting.asks} "
                                 f"(answer it where its runs are kept: {commands})")
        if not session.can_send_request:
            return _input_required(types, waiting, sealed({"durable": result.run_id, "waiting": waiting.to_json(),
                                                           "told": told.count}, tool.name))
        answer = Answer.from_json(await _elicited(context, waiting)).to(waiting)
        result = await told.during(durable.resume, result.run_id, answer)
    if result.status == "finished" and result.outcome == "success":
        return _answered(types, tool, result.answer)
    why = result.error or result.summary or ""
    return _error(types, f"the durable run {result.run_id} ended in {result.reason or result.status}"
                  + (f": {why}" if why else ""))


class _Told:
    """The progress a served durable run tells its client: each transition the run stores,
    numbered on across the call's rounds (`count` told so far), with its `source -trigger->
    dest` — as a loop served in memory tells each one as it fires. The run is asked to store
    its transitions as it goes (`StoredRuns.follow`) while a call waits for it."""

    EVERY = 0.1
    """Seconds between looks at what the run has stored."""

    def __init__(self, session: Any, durable: Any, run_id: str, count: int = 0) -> None:
        self.session, self.durable, self.run_id, self.count = session, durable, run_id, count

    async def during(self, waiting: Callable[..., Any], *arguments: Any) -> Any:
        """`waiting(*arguments)` (a call that blocks until the run finishes or waits) in a worker
        thread, telling the client each transition stored meanwhile, and all of them once
        it returned; what it returned (or raised)."""
        import anyio

        outcome: list[Any] = []

        async def work() -> None:
            try:
                outcome.append((True, await anyio.to_thread.run_sync(waiting, *arguments)))
            except Exception as error:  # raised below, in the caller's task
                outcome.append((False, error))

        async with anyio.create_task_group() as group:
            group.start_soon(work)
            followed = -1.0
            while True:
                over = bool(outcome)
                if not over and anyio.current_time() - followed > 3.0:
                    await anyio.to_thread.run_sync(self.durable.runs.follow, self.run_id)
                    followed = anyio.current_time()
                await self._tell()
                if over:
                    break
                await anyio.sleep(self.EVERY)
        done, value = outcome[0]
        if not done:
            raise value
        return value

    async def _tell(self) -> None:
        import anyio

        records = (await anyio.to_thread.run_sync(self.durable.runs.get, self.run_id)).records
        for record in records[self.count:]:
            self.count += 1
            await self.session.report_progress(self.count, None, f"{record.source} -{record.trigger}-> {record.dest}")


def _retried(params: Any) -> tuple[str, Any] | None:
    """A retried call's request state and the client's reply to the question it carries;
    None for a first call.

    Raises:
        Unanswered: the call was retried without a reply.
    """
    state, replies = getattr(params, "request_state", None), getattr(params, "input_responses", None) or {}
    if state is None:
        return None
    reply = replies.get("forge")
    if reply is None:
        raise Unanswered("the call was retried without a reply to the run's question")
    return state, reply


def _round(params: Any, goal: str, codec: Any) -> Round:
    """The round a call is: the first (a new run), or the next of the run a retried call's
    request state carries, with the client's reply.

    Raises:
        Unanswered: the state is not this server's, or the user declined the question.
    """
    retried = _retried(params)
    if retried is None:
        return Round(os.urandom(16).hex(), goal, tool=params.name)
    return Round.decode(*retried, codec, params.name)


def _elicits(session: Any) -> bool:
    """Whether the client of `session` declared it can be asked (elicitation)."""
    capabilities = session.client_capabilities
    return capabilities is not None and capabilities.elicitation is not None


async def _elicited(context: Any, waiting: Waiting) -> dict[str, Any]:
    """Ask the client's user `waiting` in place (the call can send the client a request),
    and return the answer as the journal keeps it (`answer_of`)."""
    schema, _ = form_for(waiting)
    return answer_of(waiting, await context.session.elicit_form(waiting.asks, schema,
                                                                getattr(context, "request_id", None)))


def _input_required(types: Any, waiting: Waiting, state: str) -> Any:
    """The result that asks the client's user `waiting` by round trip: the retried call
    brings the reply and `state` back."""
    schema, _ = form_for(waiting)
    ask = types.ElicitRequest(params=types.ElicitRequestFormParams(message=waiting.asks, requested_schema=schema))
    return types.InputRequiredResult(input_requests={"forge": ask}, request_state=state)


def _asker(context: Any, round: Round, blocking: Any) -> Any:
    """The performer factory of a served call: one that asks the client's user, in place
    where the call can send the client requests, by round trips where it cannot (see
    `forge.serve.asking`); None for a client without elicitation (a run that waits ends
    there)."""
    if not _elicits(context.session):
        return Eliciting.maker(round, _refusing)
    if not context.session.can_send_request:
        return Eliciting.maker(round, _round_trip)
    if blocking is None:
        return Eliciting.maker(round, lambda waiting: _elicited(context, waiting))
    return Eliciting.maker(round, lambda waiting: blocking(_elicited, context, waiting))


def _round_trip(waiting: Waiting) -> Any:
    raise NeedsInput(waiting)


def _refusing(waiting: Waiting) -> Any:
    raise Unanswered(f"the run waits in {waiting.state}: {waiting.asks} (the client cannot be asked)")


async def serve_stdio(tools: Sequence[Any], name: str = "forge", durables: Mapping[str, Any] | None = None) -> None:
    """Serve `tools` on this process's stdin and stdout until the client closes them."""
    from mcp.server.stdio import stdio_server

    server = mcp_server(tools, name, durables)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def serve_http(tools: Sequence[Any], host: str = "127.0.0.1", port: int = 8000, name: str = "forge",
               durables: Mapping[str, Any] | None = None) -> None:
    """Serve `tools` over streamable HTTP at `http://HOST:PORT/mcp` (uvicorn) until stopped."""
    import uvicorn

    uvicorn.run(mcp_server(tools, name, durables).streamable_http_app(), host=host, port=port, log_level="warning")


def _output_schema(tool: Any) -> dict[str, Any]:
    output = tool.child.output
    return {"output_schema": output.for_model()} if output is not None else {}


def _refusal(tool: Any, arguments: Mapping[str, Any]) -> str | None:
    """Why `arguments` do not fit the tool's contract, or None when they do."""
    from forge.agent.execution import ArgumentContractError, check_arguments

    try:
        check_arguments(tool.contract, arguments)
    except ArgumentContractError as refused:
        return f"{tool.name}: {refused}"
    return None


def _error(types: Any, text: str) -> Any:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _result(types: Any, tool: Any, result: Any) -> Any:
    """The run's answer as the tool's result, or an error result saying how the run ended."""
    from forge.machine.child import why_not

    if result.outcome != "success":
        why = why_not(result)
        where = "waits in" if result.outcome == "needs_input" else "ended in"
        return _error(types, f"the run {where} {result.reason}" + (f": {why}" if why else "")
                      + (" (the client cannot be asked: it declares no elicitation)" if result.outcome == "needs_input" else ""))
    return _answered(types, tool, result.answer)


def _answered(types: Any, tool: Any, answer: Any) -> Any:
    """A run's answer as the tool's result: text (JSON for anything but a string), and
    structured content when the loop has `output=`."""
    from forge.machine.child import as_json

    answer = as_json(answer)
    text = answer if isinstance(answer, str) else json.dumps(answer, default=str)
    output = tool.child.output
    structured = None
    if output is not None:
        structured = {"answer": answer} if output.wrapped else answer
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=structured)
