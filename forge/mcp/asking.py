"""What an MCP server asks in the middle of a tool call, and who answers it.

A server may, while it runs a tool, ask its client's user a question (elicitation) and
say how far it got (progress). forge hands each to the run that made the call:

- **a question is the run's question**: a `Waiting` in `input_required` naming the server
  (`Waiting.server`), the call (`tool`, `arguments`, its fingerprint) and the form the
  server asks for (the contract's `schema`), asked of the run's performer. A durable run
  waits for a person's answer, given anywhere (`forge ui`, its JSON API, `forge runs
  resume`), parking and surviving a restart as any question of a durable run does; a run
  served by `forge serve` asks its own client in place; a child run asks its parent's
  person. The reply goes back to the server as the form's fields (`form_reply`), a
  rejection as "decline", a deadline that passed as "cancel". A run nobody answers (a run
  in memory) gets the answer from the server's `elicit=`, if it has one, and otherwise its
  call ends with a `ToolError` naming the question: the policy hears it and replans (a
  model may ask its user, and the run ends needing input).
- **asked again, answered at once**: a durable run that parked on the question, or whose
  worker died, makes the call again when it goes on (the call's outcome was never
  stored); the server, asking its question again, is sent the stored answer without
  waiting. This is how MCP's own multi-round-trip requests work (protocol 2026-07-28: a
  tool call that needs input is made again with the reply), so a server's tool asks
  before it acts.
- **progress** is a `ToolProgress` event of the run's stream, while someone listens.

Every request a server sends reaches the call that it belongs to: a request made by a
round-trip call carries its call's context; an in-place one (protocol 2025-11-25 and
before carries no link to its call) is the one call's in flight on that session, and a
question while several calls are in flight on one session is refused with an error the
server is sent (open one `MCPServer` per concurrent caller to ask from each).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import queue
import time
from collections.abc import Callable, Mapping
from typing import Any

from forge.agent.retry import ToolError
from forge.child import CALLING
from forge.events import ToolProgress, sink
from forge.machine.answers import AnswerRefused, Waiting, form_reply
from forge.machine.asking import fingerprint_of

__all__ = ["CURRENT", "Elicit", "Exchange"]

Elicit = Callable[[Waiting], Any]
"""`elicit(question)`: the reply to an MCP server's question when nobody answers the run
(a run in memory): a mapping of the form's fields, their text (`form_reply` reads it), or
None to decline. May be a coroutine function under `arun()`."""

CURRENT: contextvars.ContextVar[Exchange | None] = contextvars.ContextVar("forge_mcp_call", default=None)
"""The call a request made inside the session's task of that call belongs to."""

_DONE = object()


class Exchange:
    """One MCP tool call's traffic between the session's thread, where the server's
    requests arrive, and the caller's thread or task, where the run's performer answers
    them (a durable run's wait is made in the run's own thread). Made in the caller's
    context, so it knows the run under way there (`forge.child.CALLING`) and the stream's
    sink."""

    def __init__(self, server: str, tool: str, arguments: Mapping[str, Any], elicit: Elicit | None,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.server, self.tool, self.arguments, self.elicit = server, tool, dict(arguments), elicit
        lineage = CALLING.get()
        performer = lineage[-1].performer if lineage else None
        self.performer = performer if performer is not None and performer.asks() else None
        self.listener = sink()
        self._loop = loop
        self._inbox: queue.Queue[Any] | asyncio.Queue[Any] = asyncio.Queue() if loop is not None else queue.Queue()

    def _post(self, item: Any) -> None:
        """Hand `item` to the caller (from the session's thread)."""
        if self._loop is None:
            self._inbox.put_nowait(item)
        else:
            self._loop.call_soon_threadsafe(self._inbox.put_nowait, item)

    # the session's side (its thread)

    async def asked(self, params: Any) -> Any:
        """The server's elicitation, answered by the caller: an `ElicitResult`."""
        reply: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._post(("ask", params, reply))
        return await asyncio.wrap_future(reply)

    async def progressed(self, progress: float, total: float | None, message: str | None) -> None:
        if self.listener is not None:
            self._post(("progress", ToolProgress(self.tool, progress, total, message)))

    # the caller's side

    def wait(self, call: concurrent.futures.Future[Any], timeout: float) -> Any:
        """The call's result, answering what the server asks meanwhile; `timeout` counts
        the server's time, not a person's.

        Raises:
            TimeoutError: the server took longer (the call is cancelled).
            ToolError: a question nobody answers (the call is cancelled).
        """
        assert isinstance(self._inbox, queue.Queue)
        call.add_done_callback(lambda _: self._inbox.put_nowait(_DONE))
        left = timeout
        while True:
            began = time.monotonic()
            try:
                item = self._inbox.get(timeout=max(left, 0.0))
            except queue.Empty:
                call.cancel()
                raise TimeoutError from None
            if item is _DONE:
                return call.result()
            left -= time.monotonic() - began
            if item[0] == "progress":
                self._tell(item[1])
                continue
            _, params, reply = item
            self._answer(call, params, reply, lambda question: self._reply(question, self._asked(question)))

    async def await_(self, call: concurrent.futures.Future[Any], timeout: float) -> Any:
        """`wait`, awaited in the caller's event loop."""
        assert isinstance(self._inbox, asyncio.Queue)
        inbox = self._inbox
        call.add_done_callback(lambda _: self._post(_DONE))
        left = timeout
        while True:
            began = time.monotonic()
            try:
                item = await asyncio.wait_for(inbox.get(), max(left, 0.0))
            except TimeoutError:
                call.cancel()
                raise
            if item is _DONE:
                return call.result()
            left -= time.monotonic() - began
            if item[0] == "progress":
                self._tell(item[1])
                continue
            _, params, reply = item
            question = self.question(params)
            try:
                answered = self._asked(question)
                if asyncio.iscoroutine(answered) or isinstance(answered, asyncio.Future):
                    answered = await answered
                reply.set_result(self._reply(question, answered))
            except BaseException:
                _cancel(call, reply)
                raise

    def _answer(self, call: concurrent.futures.Future[Any], params: Any, reply: concurrent.futures.Future[Any],
                answering: Callable[[Waiting], Any]) -> None:
        try:
            reply.set_result(answering(self.question(params)))
        except BaseException:  # a question nobody answers, or a durable run parking on it: the call ends
            _cancel(call, reply)
            raise

    def _tell(self, event: ToolProgress) -> None:
        if self.listener is not None:
            self.listener(event)

    def question(self, params: Any) -> Waiting:
        """The run's question for the server's elicitation `params` (a form, or a URL to
        visit: then its form has no fields and any reply accepts)."""
        url = getattr(params, "url", None)
        schema = {} if url is not None else dict(getattr(params, "requested_schema", None) or {})
        prompt = str(params.message) + (f" (open {url})" if url is not None else "")
        return Waiting("input_required", self.tool, self.arguments, fingerprint_of(self.tool, self.arguments),
                       prompt=prompt, contract={"schema": schema}, server=self.server)

    def _asked(self, question: Waiting) -> Any:
        """The answer to `question` as the journal keeps answers (`Answer.to_json()`), a
        reply of `elicit=`, or an awaitable of either.

        Raises:
            ToolError: nobody answers the run, and the server has no `elicit=`.
        """
        if self.performer is not None:
            return self.performer.ask(question)
        if self.elicit is not None:
            return {"elicited": self.elicit(question)}
        raise ToolError(f"{question.asks}: nobody answers a run in memory; run the loop durably (its questions wait "
                        f"for a person), serve it (forge serve asks its client), or give the MCPServer elicit=")

    def _reply(self, question: Waiting, answered: Any) -> Any:
        """The `ElicitResult` the server is sent for `answered`.

        Raises:
            ToolError: `elicit=` gave a reply that does not fit the form."""
        from mcp_types import ElicitResult

        if isinstance(answered, dict) and "elicited" in answered:  # elicit='s own reply
            given = answered["elicited"]
            if given is None:
                return ElicitResult(action="decline")
            try:
                text = given if isinstance(given, str) else _json(given)
                return ElicitResult(action="accept", content=form_reply(question, text))
            except AnswerRefused as refused:
                raise ToolError(f"{question.asks}: elicit= replied {given!r:.200}, which does not fit: {refused}") \
                    from None
        if answered is None:  # the question's deadline passed
            return ElicitResult(action="cancel")
        if answered.get("kind") == "text":
            return ElicitResult(action="accept", content=form_reply(question, str(answered.get("value"))))
        return ElicitResult(action="decline")


def _json(value: Any) -> str:
    import json

    return json.dumps(value, default=str)


def _cancel(call: concurrent.futures.Future[Any], reply: concurrent.futures.Future[Any]) -> None:
    if not reply.done():
        reply.set_result(_cancelled())
    call.cancel()


def _cancelled() -> Any:
    from mcp_types import ElicitResult

    return ElicitResult(action="cancel")
