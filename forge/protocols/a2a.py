"""A2A (the Agent2Agent protocol, `a2a-sdk`): a forge loop as an agent other agents call,
across processes and vendors.

`agent_card(loop, url)` describes the loop as A2A's agent card says an agent: its name and
description (the definition's), one skill whose tags are its tools, text in and text or JSON
out. `a2a_app(loop, url)` serves it — the card at `/.well-known/agent-card.json`, A2A's
JSON-RPC at `/` — with the SDK's own request handler and task store: each task is a run of
the loop on the message's text (its run id the task's id); a typed or text answer is the
task's artifact and the task completes; a run that asks its user leaves the task
`input-required` with the question, and the next message of the same context is the reply,
the run going on from where it was; a run that ends otherwise fails the task with its stop
reason. Kept in this process: a context's state lives as long as the app (the last
`contexts`).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from forge.child import as_json
from forge.extras import extra_module

__all__ = ["a2a_app", "agent_card"]


def _sdk() -> Any:
    """`a2a.types`, the protocol's types (extra `a2a`)."""
    return extra_module("a2a.types", "a2a", "forge.protocols.a2a", "a2a-sdk")


def agent_card(loop: Any, url: str, *, name: str | None = None, version: str = "1.0.0") -> Any:
    """The A2A agent card of `loop` served at `url` (see the module)."""
    types = _sdk()
    definition = loop.definition
    called = name or definition.title or definition.name
    tools = [tool.name for tool in loop.tools]
    description = definition.description or f"a forge loop ({definition.name})"
    skill = types.AgentSkill(id=definition.name, name=called, description=f"{description} Tools: {', '.join(tools)}.",
                             tags=tools)
    return types.AgentCard(
        name=called, description=description, version=version,
        supported_interfaces=[types.AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=types.AgentCapabilities(streaming=True), skills=[skill],
        default_input_modes=["text/plain"], default_output_modes=["text/plain", "application/json"])


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

    card = agent_card(loop, url, name=name)
    handler = DefaultRequestHandler(agent_executor=_executor(loop, contexts), task_store=InMemoryTaskStore(),
                                    agent_card=card)
    return Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/")])


def _executor(loop: Any, contexts: int) -> Any:
    """The SDK's `AgentExecutor` that runs `loop` for each task (see the module)."""
    from a2a.helpers.proto_helpers import new_data_part, new_task_from_user_message, new_text_part
    from a2a.server.agent_execution import AgentExecutor
    from a2a.server.tasks import TaskUpdater

    class LoopExecutor(AgentExecutor):
        def __init__(self) -> None:
            self.kept: OrderedDict[str, Any] = OrderedDict()  # a context's last state, to go on from

        async def execute(self, context: Any, event_queue: Any) -> None:
            updater = TaskUpdater(event_queue, context.task_id, context.context_id)
            if context.current_task is None:  # a new task: the protocol has it exist before any update of it
                await event_queue.enqueue_event(new_task_from_user_message(context.message))
            await updater.start_work()
            state = self.kept.get(context.context_id)
            result = await loop.arun(context.get_user_input(), run_id=context.task_id,
                                     **({"state": state} if state is not None else {}))
            self.kept[context.context_id] = result.state
            self.kept.move_to_end(context.context_id)
            while len(self.kept) > contexts:
                self.kept.popitem(last=False)
            if result.outcome == "success":
                answer = as_json(result.answer)
                part = new_text_part(answer) if isinstance(answer, str) else new_data_part(json.loads(json.dumps(
                    answer, default=str)))
                await updater.add_artifact([part], name="answer")
                await updater.complete()
            elif result.outcome == "needs_input":
                asked = result.question or f"the run waits in {result.reason}"
                await updater.requires_input(updater.new_agent_message([new_text_part(asked)]))
            else:
                why = f": {type(result.error).__name__}: {result.error}" if result.error is not None else ""
                await updater.failed(updater.new_agent_message([new_text_part(f"the run ended in {result.reason}{why}")]))

        async def cancel(self, context: Any, event_queue: Any) -> None:
            await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()

    return LoopExecutor()
