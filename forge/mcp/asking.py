"""What an MCP server asks in the middle of a tool call, and who answers it.

A server may, while it runs a tool, ask its client's user a question (elicitation), ask
the client's model for a completion (sampling) and say how far it got (progress). forge
hands each to the run that made the call:

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
- **a request for a completion** (sampling) is made by the run's own model policy (its
  `send`, the request in its form through the chat form: `sampling_chat`), journaled as a
  `sampling` call before the tool call it was made in: a replay answers it with its call, a
  call made again after a crash is answered the stored reply (`ReplayingPerformer.within`),
  and the run's `usage` counts it. A run whose policy asks no model sends the server an error.
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
import inspect
import queue
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from forge.agent.retry import ToolError
from forge.errors import UsageError
from forge.events import ToolProgress, sink
from forge.machine.asking import fingerprint_of
from forge.machine.child import CALLING
from forge.records.answers import AnswerRefused, Waiting, form_reply
from forge.records.effects import Call
from forge.records.trace import error_text

__all__ = ["CURRENT", "Elicit", "Exchange", "sampling_chat", "sampling_result"]

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
    context, so it knows the run under way there (`forge.machine.child.CALLING`) and the stream's
    sink."""

    def __init__(self, server: str, tool: str, arguments: Mapping[str, Any], elicit: Elicit | None,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.server, self.tool, self.arguments, self.elicit = server, tool, dict(arguments), elicit
        lineage = CALLING.get()
        self.run: Any = lineage[-1] if lineage else None
        self.performer = self.run.performer if self.run is not None else None
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

    async def sampled(self, params: Any) -> Any:
        """The server's sampling request, made by the caller through the run's model: a
        `CreateMessageResult`, or an `ErrorData` saying why not."""
        reply: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._post(("sample", params, reply))
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
            request = self._request(item)
            if request is not None:
                kind, params, reply = request
                self._answer(call, params, reply, self._sampled if kind == "sample" else self._answered)

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
            request = self._request(item)
            if request is not None:
                kind, params, reply = request
                try:
                    reply.set_result(await (self._asampled(params) if kind == "sample" else self._aanswered(params)))
                except BaseException:
                    _cancel(call, reply)
                    raise

    def _request(self, item: tuple[Any, ...]) -> tuple[str, Any, Any] | None:
        """What `item` from the session's thread asks the caller to answer: a question or a
        sample (`kind, params, reply`), or None for progress, told the stream."""
        if item[0] == "progress":
            self._tell(item[1])
            return None
        kind, params, reply = item
        return str(kind), params, reply

    def _answered(self, params: Any) -> Any:
        """The `ElicitResult` for the server's question `params`, asked of the run.

        Raises:
            UsageError: the run's answer can only be awaited (an `arun` run's wait), and the
                call was made blocking, from a thread of its own."""
        question = self.question(params)
        answered = self._asked(question)
        if isinstance(answered, _Elicited) and inspect.isawaitable(answered.reply):
            getattr(answered.reply, "close", lambda: None)()
            raise UsageError(f"{question.asks}: elicit= is a coroutine function, which only a call under arun() "
                             "awaits; give run() a plain function")
        if inspect.isawaitable(answered):
            getattr(answered, "close", lambda: None)()
            raise UsageError(f"{question.asks}: the run waits for its answer on its event loop, and this call of "
                             f"{self.tool} blocks a thread of its own; call the MCP server's tool from the loop "
                             "(its forge tools are inline: MCPServer.tools())")
        return self._reply(question, answered)

    async def _aanswered(self, params: Any) -> Any:
        question = self.question(params)
        answered = self._asked(question)
        if isinstance(answered, _Elicited) and inspect.isawaitable(answered.reply):
            answered = _Elicited(await answered.reply)
        elif inspect.isawaitable(answered):
            answered = await answered
        return self._reply(question, answered)

    def _answer(self, call: concurrent.futures.Future[Any], params: Any, reply: concurrent.futures.Future[Any],
                answering: Callable[[Any], Any]) -> None:
        try:
            reply.set_result(answering(params))
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

    def _sampling(self, params: Any) -> tuple[Call | None, Any]:
        """The call that makes the server's sampling request through the run's model policy
        (`send`, in its own wire form through the chat form, `from_chat`): journaled by the
        run's performer as a `sampling` call; or, when it cannot be made, the `ErrorData` the
        server is sent instead."""
        from mcp_types import INVALID_PARAMS, INVALID_REQUEST, ErrorData

        policy: Any = getattr(getattr(self.run, "config", None), "policy", None)
        if not (callable(getattr(policy, "send", None)) and callable(getattr(policy, "from_chat", None))):
            return None, ErrorData(code=INVALID_REQUEST, message=(
                f"forge samples with the model of the run that calls {self.tool}, and "
                + ("this call is made outside any run" if self.run is None else
                   "that run's policy asks no model (a Python policy)")))
        try:
            chat = sampling_chat(params, str(getattr(policy, "model", "model")))
        except UsageError as refused:
            return None, ErrorData(code=INVALID_PARAMS, message=str(refused))
        request = policy.from_chat(chat)
        return Call(policy.send, (request,), "the MCP server's sampling", "sampling", str(request.get("model") or
                                                                                          chat["model"]), request), None

    def _sampled(self, params: Any) -> Any:
        call, refused = self._sampling(params)
        if call is None:
            return refused
        try:
            reply = self.performer.call(call) if self.performer is not None else call.fn(*call.args)
        except Exception as error:
            return _failed(error)
        return sampling_result(reply)

    async def _asampled(self, params: Any) -> Any:
        call, refused = self._sampling(params)
        if call is None:
            return refused
        try:
            reply = self.performer.call(call) if self.performer is not None else call.fn(*call.args)
            if inspect.isawaitable(reply):
                reply = await reply
                if self.performer is not None:
                    self.performer.settled(call, 0, reply, None)
        except Exception as error:
            return _failed(error)
        return sampling_result(reply)

    def _asked(self, question: Waiting) -> Any:
        """The answer to `question` as the journal keeps answers (`Answer.to_json()`), a
        reply of `elicit=`, or an awaitable of either.

        Raises:
            ToolError: nobody answers the run, and the server has no `elicit=`.
        """
        if self.performer is not None and self.performer.asks():
            return self.performer.ask(question)
        if self.elicit is not None:
            return _Elicited(self.elicit(question))
        raise ToolError(f"{question.asks}: nobody answers a run in memory; run the loop durably (its questions wait "
                        f"for a person), serve it (forge serve asks its client), or give the MCPServer elicit=")

    def _reply(self, question: Waiting, answered: Any) -> Any:
        """The `ElicitResult` the server is sent for `answered`.

        Raises:
            ToolError: `elicit=` gave a reply that does not fit the form."""
        from mcp_types import ElicitResult

        if isinstance(answered, _Elicited):  # elicit='s own reply
            given = answered.reply
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


def sampling_chat(params: Any, model: str) -> dict[str, Any]:
    """A server's sampling request (`CreateMessageRequestParams`) as a chat-completions
    request to `model`: its system prompt, its messages' text, its token limit, temperature
    and stop sequences.

    Raises:
        ValueError: (a UsageError) a message that is not text (an image, audio, a tool's
            use): forge samples text."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": params.system_prompt}] if params.system_prompt \
        else []
    for message in params.messages:
        blocks = message.content if isinstance(message.content, list) else [message.content]
        if any(getattr(block, "type", None) != "text" for block in blocks):
            kinds = sorted({str(getattr(block, "type", "?")) for block in blocks} - {"text"})
            raise UsageError(f"forge samples text; this request has {', '.join(kinds)} content")
        messages.append({"role": message.role, "content": "".join(block.text for block in blocks)})
    chat: dict[str, Any] = {"model": model, "messages": messages, "max_tokens": params.max_tokens}
    if params.temperature is not None:
        chat["temperature"] = params.temperature
    if params.stop_sequences:
        chat["stop"] = list(params.stop_sequences)
    return chat


def sampling_result(reply: Any) -> Any:
    """The model's `reply` (as the journal keeps a model's reply: `{"message", "usage"}`) as
    the `CreateMessageResult` the server is sent."""
    from mcp_types import CreateMessageResult, TextContent

    message, usage = reply.get("message") or {}, reply.get("usage") or {}
    return CreateMessageResult(role="assistant", content=TextContent(type="text", text=str(message.get("content") or "")),
                               model=str(usage.get("model") or usage.get("request_model") or "model"),
                               stop_reason="endTurn")


def _failed(error: Exception) -> Any:
    from mcp_types import INTERNAL_ERROR, ErrorData

    return ErrorData(code=INTERNAL_ERROR, message=f"the model failed: {error_text(error)}")


class _Elicited(NamedTuple):
    """What `elicit=` replied (or an awaitable of it), apart from an answer of the run's."""

    reply: Any


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
