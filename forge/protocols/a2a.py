"""A2A (the Agent2Agent protocol, `a2a-sdk`): a forge loop as an agent other agents call,
across processes and vendors.

`agent_card(loop, url)` describes the loop as A2A's agent card says an agent: its name and
description (the definition's), one skill whose tags are its tools, text in and text or
JSON out (a typed loop's: JSON, its answer's JSON Schema in the card's extension
`ANSWER_SCHEMA`). `a2a_app(loop, url)` serves it — the card at `/.well-known/agent-card.json`, A2A's
JSON-RPC at `/` — with the SDK's own request handler and task store: each task is a run of
the loop on the message's text (its run id the task's id); a typed or text answer is the
task's artifact and the task completes; a run that asks its user leaves the task
`input-required` with the question, and the next message of the same context is the reply,
the run going on from where it was; a run that ends otherwise fails the task with its stop
reason. In memory, a context's state lives as long as the app (the last `contexts`). Given
a durable loop (`loop.durable(...)`), each task is a durable run whose id is the task's, taken
by whichever `forge worker` is free: the task follows it in the runs' database (a worker
restarted in the middle included), and the app keeps its tasks there too (`TASKS_TABLE`: a
restart of the app itself forgets none); a run that waits — a question, an approval — leaves the
task input-required with what it asks, and the next message to the task answers it, bound to
that question ("approve" or "reject" for an approval).

`a2a_tool(url)` is the other way round: an A2A agent (any vendor's, or a forge loop served
so) as a tool of a forge loop, called with a goal in words, its answer the tool's value —
journaled, approved, keyed and replayed as any tool call is.
"""

from __future__ import annotations

import functools
import json
from collections import OrderedDict
from typing import Any

from forge.extras import extra_module
from forge.machine.child import as_json
from forge.records.trace import error_text

__all__ = ["ANSWER_SCHEMA", "TASKS_TABLE", "a2a_app", "a2a_tool", "agent_card"]


def _sdk() -> Any:
    """`a2a.types`, the protocol's types (extra `a2a`)."""
    return extra_module("a2a.types", "a2a", "forge.protocols.a2a", "a2a-sdk")


def agent_card(loop: Any, url: str, *, name: str | None = None, version: str = "1.0.0") -> Any:
    """The A2A agent card of `loop` served at `url` (see the module)."""
    types = _sdk()
    runnable = getattr(loop, "loop", loop)  # a durable loop's AgentLoop
    definition = runnable.definition
    called = name or definition.title or definition.name
    tools = [tool.name for tool in runnable.tools]
    description = definition.description or f"a forge loop ({definition.name})"
    output = getattr(runnable, "output", None)
    answers = ["application/json"] if output is not None else ["text/plain", "application/json"]
    skill = types.AgentSkill(id=definition.name, name=called, description=f"{description} Tools: {', '.join(tools)}.",
                             tags=tools, input_modes=["text/plain"], output_modes=answers)
    extensions = [] if output is None else [_answer_schema(types, output.schema)]
    return types.AgentCard(
        name=called, description=description, version=version,
        supported_interfaces=[types.AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=types.AgentCapabilities(streaming=True, extensions=extensions), skills=[skill],
        default_input_modes=["text/plain"], default_output_modes=answers)


ANSWER_SCHEMA = "urn:forge-fsm:answer-schema"
"""The agent card extension that carries a typed loop's answer schema (`params.schema`)."""


def _answer_schema(types: Any, schema: Any) -> Any:
    """The card's extension saying the JSON Schema of a typed loop's answer: what the task's
    artifact (a data part) holds when the task completes."""
    from google.protobuf.struct_pb2 import Struct

    params = Struct()
    params.update({"schema": json.loads(json.dumps(schema, default=str))})
    return types.AgentExtension(uri=ANSWER_SCHEMA, description="the JSON Schema of the task's artifact: the loop's "
                                "typed answer", required=False, params=params)


def a2a_app(loop: Any, url: str, *, contexts: int = 1000, name: str | None = None) -> Any:
    """A Starlette app serving `loop` over A2A at `url` (see the module).

    Raises:
        ImportError: the `a2a` extra is not installed.
    """
    _sdk()
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore
    from starlette.applications import Starlette

    class Handler(DefaultRequestHandler):
        """The SDK's handler, telling the executor when its client streams (`message/stream`)."""

        async def on_message_send_stream(self, params: Any, context: Any) -> Any:
            context.state[_STREAMING] = True
            async for event in super().on_message_send_stream(params, context):
                yield event

    card = agent_card(loop, url, name=name)
    store = _stored_tasks(loop) if _is_durable(loop) else InMemoryTaskStore()
    handler = Handler(agent_executor=_executor(loop, contexts), task_store=store, agent_card=card)
    return Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/")])


TASKS_TABLE = "forge_a2a_tasks"
"""The table of the runs' database a durable loop's A2A app keeps its tasks in."""


def _is_durable(loop: Any) -> bool:
    return callable(getattr(loop, "submit", None)) and hasattr(loop, "runs")  # a loop.durable(...)


def _stored_tasks(loop: Any) -> Any:
    """A durable loop's tasks, kept in its runs' database (`TASKS_TABLE`, through the SDK's
    `DatabaseTaskStore` on SQLAlchemy's async drivers, aiosqlite or asyncpg): a task outlives
    the app as its run does, so the next message to a waiting task answers it whichever app
    process takes the message, after a restart too."""
    from a2a.server.tasks import DatabaseTaskStore
    from sqlalchemy.engine import make_url
    from sqlalchemy.ext.asyncio import create_async_engine

    url = make_url(loop.runs.url)
    driver = "sqlite+aiosqlite" if url.get_backend_name() == "sqlite" else "postgresql+asyncpg"
    store = DatabaseTaskStore(create_async_engine(url.set(drivername=driver)))
    store.task_model = _task_model()  # the SDK makes a model per store it names: one for the process instead
    return store


@functools.lru_cache(maxsize=1)
def _task_model() -> Any:
    """The SDK's task columns on `TASKS_TABLE`, a model made once per process (SQLAlchemy
    defines a table once per metadata) and named as forge's (the SDK's `create_task_model`
    names each `TaskModel`, which its metadata warns about)."""
    from a2a.server.models import Base, TaskMixin

    class ForgeA2ATask(TaskMixin, Base):
        __tablename__ = TASKS_TABLE

    return ForgeA2ATask


_STREAMING = "forge_streaming"
"""Set in a request's call context when its client reads the task as a stream."""


def _executor(loop: Any, contexts: int) -> Any:
    """The SDK's `AgentExecutor` that runs `loop` for each task (see the module)."""
    from a2a.helpers.proto_helpers import new_task_from_user_message
    from a2a.server.agent_execution import AgentExecutor
    from a2a.server.tasks import TaskUpdater

    durable = _is_durable(loop)

    class LoopExecutor(AgentExecutor):
        def __init__(self) -> None:
            self.kept: OrderedDict[str, Any] = OrderedDict()  # a context's last state, to go on from

        async def execute(self, context: Any, event_queue: Any) -> None:
            updater = TaskUpdater(event_queue, context.task_id, context.context_id)
            if context.current_task is None:  # a new task: the protocol has it exist before any update of it
                await event_queue.enqueue_event(new_task_from_user_message(context.message))
            await updater.start_work()
            if durable:
                await _durable_task(loop, context, updater)
            else:
                await _task(loop, context, updater, self.kept, contexts)

        async def cancel(self, context: Any, event_queue: Any) -> None:
            if durable:
                from starlette.concurrency import run_in_threadpool

                await run_in_threadpool(loop.cancel, context.task_id)
            await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()

    return LoopExecutor()


async def _task(loop: Any, context: Any, updater: Any, kept: OrderedDict[str, Any], contexts: int) -> None:
    """The task as a run of the loop in memory, going on from its context's last state (the
    last `contexts` contexts are kept); streamed transition by transition to a client that
    streams."""
    state = kept.get(context.context_id)
    options = {"run_id": context.task_id, **({"state": state} if state is not None else {})}
    if _streams(context):
        async for event in loop.astream(context.get_user_input(), **options):
            await _told(updater, event)
        result = event.result  # the stream's last event: RunFinished
    else:
        result = await loop.arun(context.get_user_input(), **options)
    kept[context.context_id] = result.state
    kept.move_to_end(context.context_id)
    while len(kept) > contexts:
        kept.popitem(last=False)
    why = f": {error_text(result.error)}" if result.error is not None else ""
    asked = (result.question or f"the run waits in {result.reason}") if result.outcome == "needs_input" else None
    await _ended(updater, result.outcome == "success", result.answer, asked, f"the run ended in {result.reason}{why}")


async def _durable_task(loop: Any, context: Any, updater: Any) -> None:
    """The task as a durable run of the loop (its id the task's), taken by a worker: a new
    task starts it; a message to a task that waits answers what it waits for (`_answer`),
    bound to that question. The task follows the run from the runs' database until it
    finishes or waits again, whichever worker runs it."""
    from starlette.concurrency import run_in_threadpool

    runs, run_id = loop.runs, context.task_id
    if context.current_task is None:
        await run_in_threadpool(loop.submit, context.get_user_input(), run_id)
        answers = 0
    else:
        stored = await run_in_threadpool(runs.get, run_id)
        if stored.waiting is None:
            await _ended(updater, False, None, None, f"the run is {stored.status}: it waits for nothing")
            return
        await run_in_threadpool(runs.resume, run_id, _answer(context.get_user_input(), stored.waiting))
        answers = stored.answers + 1
    if _streams(context):
        await _followed(runs, run_id, answers, updater)
    ended = await run_in_threadpool(runs.wait, run_id, None, answers)
    asked = ended.waiting.asks if ended.status == "waiting" and ended.waiting is not None else None
    why = f": {ended.error}" if ended.error else ""
    await _ended(updater, ended.outcome == "success", ended.answer, asked,
                 f"the run ended in {ended.reason or ended.status}{why}")


async def _ended(updater: Any, succeeded: bool, answer: Any, asked: str | None, failure: str) -> None:
    """The task's state as its run left it: input-required with what it `asked`, completed
    with the answer as its artifact, or failed saying why (`failure`)."""
    from a2a.helpers.proto_helpers import new_text_part

    if asked is not None:
        await updater.requires_input(updater.new_agent_message([new_text_part(asked)]))
    elif succeeded:
        await updater.add_artifact([_part(answer)], name="answer")
        await updater.complete()
    else:
        await updater.failed(updater.new_agent_message([new_text_part(failure)]))


def _part(answer: Any) -> Any:
    """An answer as an artifact's part: text, or JSON data for a typed answer."""
    from a2a.helpers.proto_helpers import new_data_part, new_text_part

    shown = as_json(answer)
    return new_text_part(shown) if isinstance(shown, str) else new_data_part(json.loads(json.dumps(shown, default=str)))


def _streams(context: Any) -> bool:
    call = getattr(context, "call_context", None)
    return bool(call is not None and call.state.get(_STREAMING))


async def _told(updater: Any, event: Any) -> None:
    """A transition the run fired, told as the task's working status: what happened in
    words, and the transition's record as data."""
    from forge.events import TransitionFired

    if isinstance(event, TransitionFired):
        from a2a.helpers.proto_helpers import new_data_part, new_text_part
        from a2a.types import TaskState

        from forge.narrate import describe

        record = event.record
        parts = [new_text_part(describe(record)), new_data_part(json.loads(json.dumps(record.to_json(), default=str)))]
        await updater.update_status(TaskState.TASK_STATE_WORKING, updater.new_agent_message(parts))


async def _followed(runs: Any, run_id: str, answers: int, updater: Any) -> None:
    """Tell the durable run's transitions from the runs' database as it moves, until it
    waits or stops: from its `answers`-th answer on (what came before was told before)."""
    from starlette.concurrency import iterate_in_threadpool

    from forge.events import TransitionFired
    from forge.records.definition import ANSWER_TRIGGER

    telling = answers == 0
    async for event in iterate_in_threadpool(runs.stream(run_id)):
        if not telling and isinstance(event, TransitionFired) and event.record.trigger == ANSWER_TRIGGER:
            answers -= 1
            telling = answers == 0
        if telling:
            await _told(updater, event)


def _answer(text: str, waiting: Any) -> Any:
    """A message's text as the answer to `waiting`, read by forge's one reader of answers
    (`forge.records.answers.read_answer`): "approve" or "reject" in any case (a person's
    words) for a call waiting for approval, a tool's name where the run waits for one, else
    the reply itself."""
    from forge.records.answers import read_answer

    said = text.strip()
    if waiting.fingerprint and said.lower() in ("approve", "reject"):
        return read_answer(said.lower(), waiting.fingerprint)
    if "tool" in waiting.answers and "text" not in waiting.answers:
        return read_answer("tool", said)
    return read_answer("text", said)


def a2a_tool(url: str, name: str | None = None, *, side_effect: bool = True, timeout: float = 300.0) -> Any:
    """The A2A agent at `url` as a `forge.Tool` named `name` (default: from its card's name)
    taking `{"goal": "..."}`: each call sends the goal as a new task with `a2a-sdk`'s client
    and returns the task's answer (its artifact's text, or its JSON data). The card is read
    now, for the tool's description. `side_effect` (default True: another agent may act in
    the world) makes its calls approved and keyed as the loop's side effects are.

    Raises:
        UsageError: (when made) no agent card at `url`.
        ToolError: (when called) the agent asks for input, or the task fails, cancels or
            is rejected — its words told to the policy, which may replan.
    """
    import re

    from forge.errors import UsageError
    from forge.machine.child import GOAL_SCHEMA
    from forge.tools import Tool

    _sdk()
    try:
        card = _run_async(_card(url), timeout)
    except Exception as error:
        raise UsageError(f"no A2A agent card at {url!r}: {type(error).__name__}: {error}") from error
    called = name or re.sub(r"[^A-Za-z0-9_]+", "_", card.name).strip("_").lower() or "agent"
    return Tool(called, {called}, _Asking(card, called, url, timeout), side_effect=side_effect, schema=GOAL_SCHEMA,
                description=f"ask the agent {card.name!r}: {card.description}")


class _Asking:
    """An A2A agent tool's handler: each call a new task of the agent of `card`; `remote`
    says which agent it is, for the loop's diagram (`forge.machine.child.RemoteAgent`)."""

    def __init__(self, card: Any, name: str, url: str, timeout: float) -> None:
        from forge.machine.child import RemoteAgent

        self.card, self.name, self.timeout = card, name, timeout
        self.remote = RemoteAgent(card.name, url)
        self.__name__ = name

    def __call__(self, goal: str) -> Any:
        return _run_async(_asked(self.card, self.name, goal), self.timeout)


async def _card(url: str) -> Any:
    import httpx
    from a2a.client.card_resolver import A2ACardResolver

    async with httpx.AsyncClient() as http:
        return await A2ACardResolver(http, url).get_agent_card()


async def _asked(card: Any, name: str, goal: str) -> Any:
    """The answer of the agent of `card` to `goal`, sent as a new task."""
    from a2a.client import ClientConfig, create_client
    from a2a.helpers.proto_helpers import new_text_message
    from a2a.types import Role, SendMessageRequest, TaskState
    from google.protobuf.json_format import MessageToDict

    from forge.agent.retry import ToolError

    client = await create_client(card, ClientConfig(streaming=False))
    try:
        request = SendMessageRequest(message=new_text_message(goal, role=Role.ROLE_USER))
        task = [each.task async for each in client.send_message(request)][-1]
    finally:
        await client.close()
    said = " ".join(part.text for part in task.status.message.parts if part.text) if task.status.HasField("message") \
        else ""
    if task.status.state != TaskState.TASK_STATE_COMPLETED:
        state = TaskState.Name(task.status.state).removeprefix("TASK_STATE_").lower().replace("_", "-")
        raise ToolError(f"agent {name!r} left the task {state}" + (f": {said}" if said else ""))
    parts = [part for artifact in task.artifacts for part in artifact.parts]
    if len(parts) == 1 and parts[0].HasField("data"):
        return MessageToDict(parts[0])["data"]
    return "\n".join(part.text for part in parts if part.text) or said


def _run_async(coroutine: Any, timeout: float) -> Any:
    """`coroutine` run to its end from sync code (a tool's handler runs in a thread of its
    own, so no event loop runs there; one in this thread is left alone: a thread runs it)."""
    import asyncio
    import concurrent.futures

    async def bounded() -> Any:
        return await asyncio.wait_for(coroutine, timeout)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(bounded())
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, bounded()).result()
