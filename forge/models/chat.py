"""An LLM as the policy (extra `forge[llm]`, on the official `openai` client), for any
OpenAI-compatible chat-completions endpoint.

`ChatPolicy` offers the loop's tools to the model with the JSON Schemas of their contracts,
turns each tool call into `Intent.call`, hands the loop several calls of one response at
once (it makes those without side effects together, the others one step each, in order),
sends every observation back as a tool message paired with its call's id (the payload as
JSON, an error as text), and turns a final assistant message into `Finish` (with a loop's
`output=`, the model is asked for that shape: structured output, or a `final_answer` tool
where the endpoint has none). A call the loop cannot make (an unknown tool, arguments that
are not a JSON object) is told to the model as an error and the model is asked again; a
call with wrongly typed arguments is refused by the tool's contract, which the model is
told too. The chat history lives in the run's `LoopState.messages`, so the debugger shows
it, the trace records it, and a conversation goes on from it (`loop.run(goal,
state=previous.state)`).

Sync under `run()` and async under `arun()`: inside a running event loop the policy returns
a coroutine, awaited by the loop, that uses the async client. While a consumer streams the
run (`AgentLoop.stream`, `forge.events`), each request is sent with `stream=True` and its
reply's text and tool calls go to the consumer as they come; the reply the journal keeps is
the same as a request sent without streaming makes (the request too: `stream` is how it is
sent, not what it asks).

`ChatPolicy` is a `forge.policy.ModelPolicy`: the loop sends each of its requests, so a
request and the model's reply are an entry of the run's journal whose identity is the
request (model, messages, tools, options). A replay, a fork and a cassette run the
policy's code again and answer each request from the journal: a request that differs (a
changed system prompt, a tool's description, the model) fails the replay, naming the first
field that differs.
"""

from __future__ import annotations

import inspect
import json
import re
import time
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from forge.agent.observations import LoopState, Observation
from forge.bounded import TooLarge, loads
from forge.errors import ForgeError, UsageError
from forge.events import ModelCallStarted, Sink, TextDelta, ToolCallDelta, sink
from forge.extras import extra_module
from forge.models.compaction import (
    COMPACTED,
    ContextLimit,
    ContextOverflow,
    compacted_messages,
    covered,
    left_out,
    size_of,
    summary_request,
    trim_note,
)
from forge.output import AnswerInvalid, Output
from forge.policy import ASK, FINISH, Ask, Decision, Finish, Intent
from forge.records.effects import can_await, complete
from forge.records.trace import quoted
from forge.records.usage import USAGE_KEY, ModelCall, check_budget, usage_of
from forge.tools import Tool

__all__ = ["ASK_TOOL", "ECHO_LIMIT", "FINAL_ANSWER", "WRAP_UP_NOTE", "ChatPolicy", "ModelError", "ModelRefused", "decided",
           "tool_definitions"]

_Steps = Generator[Mapping[str, Any], Any, "Decision"]

ASK_TOOL: dict[str, Any] = {"type": "function", "function": {
    "name": ASK,
    "description": ("Ask the user a question, when the request lacks a value you need (a date, a name, an amount) "
                    "that no other tool can find. Do not guess missing values: ask. The user's reply comes back "
                    "as this call's result."),
    "parameters": {"type": "object", "properties": {"question": {"type": "string", "description": "The question"}},
                   "required": ["question"], "additionalProperties": False},
}}
"""The tool `ChatPolicy` offers the model to ask the user (its call becomes `forge.Ask`)."""

FINAL_ANSWER = "final_answer"
"""The tool `ChatPolicy` offers the model to give a typed answer with, where the endpoint has
no structured output (`structured_output=False`): its call becomes `forge.Finish`."""


WRAP_UP_NOTE = ("The budget for this task is spent: call no more tools. Give your final answer now, from what you "
                "have found so far, and say plainly what is left undone.")
"""What a model is told in a wrap-up call, by default (`ChatPolicy.wrap_up_note`)."""

ECHO_LIMIT = 300
"""How much of a call the loop cannot make (arguments that are not JSON) is told back to the
model with the error: enough to see the mistake, never the whole of a huge one."""


class ModelError(ForgeError, RuntimeError):
    """The model's endpoint gave nothing the loop can use: calls it cannot make, time after
    time; a response without a message (no choices, an empty list, a null message, a body
    that is not JSON); or a refusal (`ModelRefused`). The run ends in fatal_error."""


class ModelRefused(ModelError):
    """The model refused the request (its message's `refusal`): a refusal is not an answer,
    so the run ends in fatal_error with the model's words, rather than finishing."""

    def __init__(self, refusal: str) -> None:
        super().__init__(f"the model refused: {refusal}")
        self.refusal = refusal


def tool_definitions(tools: Iterable[Tool], strict: bool = False) -> list[dict[str, Any]]:
    """The chat-completions `tools` for `tools`: each one's name, description and the JSON
    Schema of its arguments (a tool without a schema gets one naming its arguments, any
    type). `strict` asks the endpoint to hold the model to the schema where it can."""
    offered = []
    for tool in tools:
        schema = dict(tool.schema) if tool.schema is not None else {
            "type": "object",
            "properties": {name: {} for name in sorted(tool.required | tool.optional)},
            "required": sorted(tool.required),
            "additionalProperties": False,
        }
        function: dict[str, Any] = {"name": tool.name, "description": tool.description or tool.name,
                                    "parameters": schema}
        if strict:
            function["strict"] = True
        offered.append({"type": "function", "function": function})
    return offered


@dataclass(frozen=True)
class ChatPolicy:
    """A policy that asks a chat model what to do next.

    `model` names it; `client` / `async_client` are `openai.OpenAI` / `openai.AsyncOpenAI`
    (default: made from OPENAI_BASE_URL and OPENAI_API_KEY when first needed; given only
    `client`, `arun` talks to the same endpoint with the same key); `system` is
    the system prompt. `strict` offers the tools with strict schemas; `options` go into
    every request (temperature, …); `max_repairs` bounds how often, within one step, the
    model is asked again after calls the loop cannot make. An `AgentLoop` gives the policy
    its tools (`with_tools`) and its token budget (`with_token_budget`).

    `ask` (on by default) offers the model an `ask_user` tool: its call becomes `forge.Ask`,
    the run ends in `input_required`, and the next turn's goal (`loop.run(reply,
    state=result.state)`) goes back to the model as that call's result. Each response's
    `usage` is kept on its assistant message (`forge.records.usage`), so `result.usage` and the
    trace show what every call cost; `provider` names the endpoint's provider for
    OpenTelemetry (`gen_ai.provider.name`). A token budget counts the whole conversation,
    every turn of it; a prompt too long for it is refused unsent (its size counted by
    `count_tokens`, else estimated as `ContextLimit` does).

    Raises (when called):
        ModelError: the model made only unusable calls `max_repairs` times in a row, or
            the endpoint's response has no message, or (`ModelRefused`) the model refused.
        BudgetExhausted: the next call would go past the token budget (the run ends in
            `budget_exhausted`).
        openai.OpenAIError: the endpoint failed (the run ends in fatal_error, recorded).
    """

    model: str
    client: Any = None
    system: str | None = None
    async_client: Any = None
    strict: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)
    max_repairs: int = 3
    tools: tuple[Tool, ...] = ()
    ask: bool = True
    token_budget: int | None = None
    provider: str = "openai"
    count_tokens: Callable[[Mapping[str, Any]], int] | None = None
    """How many prompt tokens a request (the dict sent) takes, with the model's own
    tokenizer: with a token budget, a request whose prompt alone would take the
    conversation past it is not sent (`forge.records.usage`). Without it the prompt's size is
    estimated as `ContextLimit` estimates it (JSON length over four)."""
    output: Output | None = None
    """The shape of the final answer (`forge.output`; an `AgentLoop(output=...)` gives it,
    `with_output`): the model is asked for it, and an answer that does not have it is told
    to the model, which answers again."""
    structured_output: bool = True
    """How the shape is asked for: as structured output (`response_format` of type
    `json_schema`, the answer the reply's content), which OpenAI's endpoints and most
    compatible ones offer; False, for an endpoint without it: the model is offered a
    `final_answer` tool whose parameters are the shape, and its call is the answer."""
    context: ContextLimit | None = None
    """Keeps every request within a context limit (`forge.models.compaction`): the oldest
    exchanges are left out, whole, noted or summarised by the model. None: everything is
    sent."""
    wrap_up_note: str = WRAP_UP_NOTE
    """What the model is told in a wrap-up call (`wrapping_up`), before it answers."""
    wrapping: bool = False
    """This policy is the wrap-up of one (`wrapping_up`)."""

    def with_tools(self, tools: Sequence[Tool]) -> ChatPolicy:
        """This policy offering `tools` (what `AgentLoop` calls with its own).

        Raises:
            ValueError: a tool is named `ask_user` while the policy offers its own (`ask`).
        """
        if self.ask and any(tool.name == ASK for tool in tools):
            raise UsageError(f"a tool is named {ASK!r}, the tool ChatPolicy offers the model to ask the user: "
                             "rename it, or pass ChatPolicy(..., ask=False)")
        return replace(self, tools=tuple(tools))

    def with_output(self, output: Output) -> ChatPolicy:
        """This policy asking the model for answers of `output`'s shape (what `AgentLoop`
        calls with its `output=`).

        Raises:
            ValueError: the shape is asked for with a `final_answer` tool
                (`structured_output=False`) and a tool has that name.
        """
        if not self.structured_output and any(tool.name == FINAL_ANSWER for tool in self.tools):
            raise UsageError(f"a tool is named {FINAL_ANSWER!r}, the tool ChatPolicy offers the model to give a typed "
                             "answer (structured_output=False): rename it, or use structured output")
        return replace(self, output=output)

    def with_token_budget(self, budget: int) -> ChatPolicy:
        """This policy refusing a model call that would take its run past `budget` tokens
        (what `AgentLoop(token_budget=...)` calls)."""
        return replace(self, token_budget=budget)

    def wrapping_up(self) -> ChatPolicy:
        """This policy making the wrap-up call (`forge.machine.stages.wrap_up`): the calls the
        model left open are told they were not made, `wrap_up_note` is said, the tools are
        offered but not to be called (`tool_choice` "none"), and its token budget is not
        checked for this one call; the reply's text is the answer."""
        return replace(self, wrapping=True, token_budget=None)

    def __call__(self, goal: str, state: LoopState) -> Any:
        """The decision, sending the requests itself (as a `RecordedPolicy` is called); an
        `AgentLoop` sends them through its journal instead (`requests`, `send`)."""
        return decided(self, goal, state)

    def send(self, request: Mapping[str, Any]) -> Any:
        """Send `request` to the endpoint: the reply as JSON, `{"message": {…}, "usage":
        {…}}` (an awaitable of it where the caller can await, `can_await`).

        Raises:
            ModelError: the response has no message, or its body is not JSON.
            openai.OpenAIError: the endpoint failed.
        """
        if can_await():
            return self._aask(request)
        openai = _openai()
        started, clock = time.time(), time.perf_counter()
        listener = sink()
        try:
            if listener is None:
                response = self._sync_client().chat.completions.create(**request)
            else:
                listener(ModelCallStarted(self.model))
                assembled = _Assembled(listener)
                for chunk in self._sync_client().chat.completions.create(**request, **_STREAMED):
                    assembled.take(chunk)
                response = assembled.response()
        except ValueError as error:  # a body that is not JSON (openai's own errors are not ValueErrors)
            raise ModelError(f"the model's endpoint answered with a body that is not JSON: {error}") from error
        except openai.APIConnectionError as error:
            raise _naming_endpoint(error, self._sync_client()) from None
        return self._reply(response, started, time.perf_counter() - clock)

    async def _aask(self, request: Mapping[str, Any]) -> Any:
        openai = _openai()
        started, clock = time.time(), time.perf_counter()
        listener = sink()
        try:
            if listener is None:
                response = await self._async_client().chat.completions.create(**request)
            else:
                listener(ModelCallStarted(self.model))
                assembled = _Assembled(listener)
                async for chunk in await self._async_client().chat.completions.create(**request, **_STREAMED):
                    assembled.take(chunk)
                response = assembled.response()
        except ValueError as error:
            raise ModelError(f"the model's endpoint answered with a body that is not JSON: {error}") from error
        except openai.APIConnectionError as error:
            raise _naming_endpoint(error, self._async_client()) from None
        return self._reply(response, started, time.perf_counter() - clock)

    def _reply(self, response: Any, started: float, seconds: float) -> dict[str, Any]:
        """A response as the journal keeps it: the assistant message and what the call cost."""
        call = replace(_call_of(response, started, seconds), request_model=self.model, provider=self.provider)
        return {"message": _as_message(_message_of(response)), "usage": call.to_json()}

    def _sync_client(self) -> Any:
        if self.client is None:
            object.__setattr__(self, "client", _openai().OpenAI())
        return self.client

    def _async_client(self) -> Any:
        if self.async_client is None:
            made = _openai().AsyncOpenAI() if self.client is None else _async_twin(self.client)
            object.__setattr__(self, "async_client", made)
        return self.async_client

    def requests(self, goal: str, state: LoopState) -> _Steps:
        """The decision, written once (`forge.policy.ModelPolicy`): it yields each request to
        send and receives the reply `send` made of the response (the model's message and
        its call's usage); it returns the intent, the answer or the question.

        Raises:
            ModelError: the model made only unusable calls `max_repairs` times in a row, or
                (`ModelRefused`) refused.
            BudgetExhausted: the next request would go past the token budget.
        """
        messages = state.messages
        self._begin_turn(goal, messages, state)
        self._take_in(state.observations, messages, state.turn_start)
        if self.wrapping:
            return (yield from self._wrapped_up(messages))
        for _ in range(self.max_repairs + 1):
            intent = self._next_call(messages)  # unusable calls are answered on the way
            if intent is not None:
                return intent
            request = self._request(messages)
            size = 0  # the prompt's tokens: sized (counted or estimated) only where a limit needs them
            if self.context is not None or self.token_budget is not None:
                size = size_of(request, self.count_tokens)
            if self.context is not None and size > self.context.tokens:
                request, size = yield from self._compacted(messages, size)
            check_budget(usage_of(messages), self.token_budget, size)
            reply = yield request
            message = reply["message"]
            messages.append({**message, USAGE_KEY: reply["usage"]})
            refusal = message.get("refusal")
            if refusal:
                raise ModelRefused(refusal)
            if not message.get("tool_calls"):
                return Finish(self._answer_of(message.get("content") or ""))
        raise ModelError(f"the model made only calls the loop cannot make, {self.max_repairs + 1} times in a row")

    def _wrapped_up(self, messages: list[dict[str, Any]]) -> _Steps:
        """The wrap-up call (`wrapping_up`): its answer, the reply's text."""
        messages.extend({"role": "tool", "tool_call_id": call["id"], "content": "not made: the budget is spent"}
                        for call in _pending_calls(messages))
        messages.append({"role": "user", "content": self.wrap_up_note})
        request = self._request(messages)
        if self.context is not None:
            size = size_of(request, self.count_tokens)
            if size > self.context.tokens:
                request, _ = yield from self._compacted(messages, size)
        reply = yield request
        message = reply["message"]
        messages.append({**message, USAGE_KEY: reply["usage"]})
        if message.get("refusal"):
            raise ModelRefused(message["refusal"])
        return Finish(self._answer_of(message.get("content") or ""))

    def _compacted(self, messages: list[dict[str, Any]], size: int
                   ) -> Generator[Mapping[str, Any], Any, tuple[dict[str, Any], int]]:
        """The request and its size, once the oldest exchanges are left out of the requests
        from now on so that it fits the context limit (`forge.models.compaction`): `size` is the
        request's as it stands, over the limit; each new request is sized as it is sent, note
        or summary included, and left out further while it is still over, a summary too long
        to send beside the latest exchange replaced by a note.

        Raises:
            ContextOverflow: it is over the limit with everything that may go gone.
        """
        assert self.context is not None
        while True:
            if not (yield from self._compact(messages)):
                _, marker, _ = covered(messages, self.context.keep_task)
                if marker is None or marker[COMPACTED]["strategy"] == "trim":
                    raise ContextOverflow(size, self.context.tokens)
                # a summary too long to send beside the latest exchange: a note stands for what it covers
                messages.append({"role": "system", "content": trim_note(marker[COMPACTED]["messages"]),
                                 COMPACTED: {**marker[COMPACTED], "strategy": "trim"}})
            request = self._request(messages)
            size = size_of(request, self.count_tokens)
            if size <= self.context.tokens:
                return request, size

    def _compact(self, messages: list[dict[str, Any]]) -> Generator[Mapping[str, Any], Any, bool]:
        """Leave more of the oldest exchanges out, noted or summarised by the model in a
        marker message the run keeps; False when nothing more can go (the latest exchange
        is next). A note is sized as written when choosing how much goes; a summary, not
        known before it is made, as the note would be."""
        assert self.context is not None
        limit, keep_task = self.context.tokens, self.context.keep_task
        start, marker, already = covered(messages, keep_task)

        def dropped(upto: int) -> int:
            return sum(1 for m in messages[start:upto] if COMPACTED not in m)

        def fits(upto: int) -> bool:
            trial = [*messages, {"role": "system", "content": trim_note(dropped(upto)), COMPACTED: {"upto": upto}}]
            return size_of(self._request(trial), self.count_tokens) <= limit

        upto = left_out(messages, fits, keep_task)
        if upto <= already:
            return False  # the latest exchange is next: nothing more can go
        count = dropped(upto)
        note: dict[str, Any] = {"role": "system", COMPACTED: {"upto": upto, "strategy": self.context.strategy,
                                                            "messages": count}}
        if self.context.strategy == "summarise":
            earlier = [{"role": "system", "content": marker.get("content")}] if marker is not None else []
            reply = yield self._summary_request([*earlier, *messages[already:upto]])
            note["content"] = f"Summary of the conversation so far: {reply['message'].get('content') or ''}"
            note[USAGE_KEY] = reply["usage"]
        else:
            note["content"] = trim_note(count)
        messages.append(note)
        return True

    def _summary_request(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """The request asking the model to summarise `messages` (`forge.models.compaction`)."""
        return self.from_chat(summary_request(self.model, messages, self.options))

    def _answer_of(self, content: str) -> Any:
        """A final message's content as the answer: with structured output, the JSON it is
        (unwrapped from `{"answer": …}` where the shape is not an object); else the text."""
        if self.output is None or not self.structured_output:
            return content
        try:
            return self.output.from_model(loads(content, "the answer"))
        except ValueError:
            return content  # not JSON: the output's check says so to the model

    def _asks_by_tool(self) -> bool:
        return self.output is not None and not self.structured_output

    WIRE: ClassVar[str] = "chat"
    """The wire form of this policy's requests (a native policy's is its provider's): a
    `FallbackPolicy` turns a request into another model's form through the chat form
    (`as_chat`, `from_chat`) when their forms differ."""

    def as_chat(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """`request` (one of this policy's) in the chat-completions form."""
        return dict(request)

    def from_chat(self, chat: Mapping[str, Any]) -> dict[str, Any]:
        """A chat-completions request in this policy's wire form, its messages' own `_` keys
        left out (what this endpoint is sent)."""
        return {**chat, "messages": [{k: v for k, v in m.items() if not k.startswith("_")} for m in chat["messages"]]}

    def _request(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        return self.from_chat(self._chat_request(messages))

    def _chat_request(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """The request for `messages` in the chat-completions form, each message with its own
        `_` keys (a native policy's reply kept as its provider sent it)."""
        sent = compacted_messages(messages, self.context.keep_task) if self.context is not None else messages
        request: dict[str, Any] = {"model": self.model, "messages": sent, **self.options}
        final = [_final_answer_tool(self.output)] if self.output is not None and not self.structured_output else []
        if self.tools or self.ask or final:
            request["tools"] = [*tool_definitions(self.tools, self.strict), *([ASK_TOOL] if self.ask else []), *final]
            if self.wrapping:
                request["tool_choice"] = "none"
        if self.output is not None and self.structured_output:
            request["response_format"] = {"type": "json_schema", "json_schema": {
                "name": re.sub(r"[^A-Za-z0-9_-]", "_", self.output.name)[:64] or "answer",
                "schema": self.output.for_model(), "strict": self.strict}}
        return request

    def _begin_turn(self, goal: str, messages: list[dict[str, Any]], state: LoopState) -> int:
        """The goal as the user's message, once per turn (a turn is known by how many
        observations earlier turns left): the reply to the model's `ask_user` call, when
        the last turn ended with it, else a user message. Returns where the turn's messages
        start (its usage counts against the budget)."""
        turn = state.turn_start
        if not messages and self.system:
            messages.append({"role": "system", "content": self.system})
        for index, message in enumerate(messages):
            if message.get("_turn") == turn:
                return index
        for call in _pending_calls(messages):  # the answer that ended the last turn, given with final_answer
            if call["function"]["name"] == FINAL_ANSWER:
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": "Answer received."})
        asked = [c for c in _pending_calls(messages) if c["function"]["name"] == ASK]
        last = state.observations[-1] if state.observations else None
        if asked and last is not None and last.tool_name == ASK:
            messages.append({"role": "tool", "tool_call_id": asked[0]["id"], "content": goal, "_turn": turn,
                             "_observation": last.sequence})
        else:
            messages.append({"role": "user", "content": goal, "_turn": turn})
        return len(messages) - 1

    def _take_in(self, observations: Sequence[Observation], messages: list[dict[str, Any]], turn: int) -> None:
        """Each observation not yet told, as the tool message of the call it answers, or
        for an answer of this turn (asked again, so it was rejected), a note saying so."""
        told = {m["_observation"] for m in messages if "_observation" in m}
        for observation in observations:
            if observation.sequence in told:
                continue
            if observation.tool_name == ASK:
                continue  # answered by the next turn's goal (see _begin_turn)
            if observation.tool_name == FINISH and isinstance(observation.payload, (Finish, AnswerInvalid)):
                if observation.sequence <= turn:
                    continue  # the answer that ended an earlier turn
                said = "That answer was not accepted. Keep working on the goal."
                if isinstance(observation.payload, AnswerInvalid):
                    said = f"error: {observation.payload}. Give the answer again, in the shape asked for."
                final = [c for c in _pending_calls(messages) if c["function"]["name"] == FINAL_ANSWER]
                if final:
                    messages.append({"role": "tool", "tool_call_id": final[0]["id"],
                                     "_observation": observation.sequence, "content": said})
                else:
                    messages.append({"role": "user", "_observation": observation.sequence, "content": said})
                continue
            pending = _pending_calls(messages)
            if not pending:
                continue  # not from one of this model's calls (an earlier policy of the conversation)
            messages.append({"role": "tool", "tool_call_id": pending[0]["id"], "_observation": observation.sequence,
                             "content": _content_of(observation)})

    def _next_call(self, messages: list[dict[str, Any]]) -> Intent | list[Intent] | Ask | Finish | None:
        """The pending calls the loop can make next: the first as an intent (or, `ask_user`,
        as the question; `final_answer`, as the answer), or the tool calls before anything
        else as a list of intents (the loop makes those without side effects together);
        unusable ones met before any usable call are answered with the error on the way."""
        names = {tool.name for tool in self.tools} | ({ASK} if self.ask else set()) | \
            ({FINAL_ANSWER} if self._asks_by_tool() else set())
        usable: list[Intent] = []
        for call in _pending_calls(messages):
            name, raw = call["function"]["name"], call["function"].get("arguments") or "{}"
            problem = None
            if name not in names:
                problem = f"error: there is no tool named {name!r}; the tools are {', '.join(sorted(names))}"
            elif isinstance(raw, dict):  # an endpoint that sends the object itself, not its JSON text: use it
                arguments = raw
            else:
                try:
                    arguments = loads(raw, "the arguments")
                    if not isinstance(arguments, dict):
                        problem = f"error: the arguments must be a JSON object, got {quoted(str(raw), ECHO_LIMIT)}"
                except TooLarge as error:
                    problem = f"error: {error}"
                except (json.JSONDecodeError, TypeError) as error:
                    why = error.msg if isinstance(error, json.JSONDecodeError) else "not text"
                    problem = f"error: the arguments are not valid JSON ({why}): {quoted(str(raw), ECHO_LIMIT)}"
            if usable and (problem is not None or name in (ASK, FINAL_ANSWER)):
                break  # met once the calls before it are answered
            if problem is None and name == FINAL_ANSWER and self.output is not None:
                return Finish(self.output.from_model(arguments))
            if problem is None and name == ASK:
                question = arguments.get("question")
                if isinstance(question, str) and question.strip():
                    return Ask(question)
                problem = f"error: {ASK} needs a non-blank question, got {quoted(str(raw), ECHO_LIMIT)}"
            if problem is None:
                usable.append(Intent(frozenset(), arguments, tool=name, call_id=call["id"]))
                continue
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": problem})
        if not usable:
            return None
        return usable[0] if len(usable) == 1 else usable


_STREAMED: dict[str, Any] = {"stream": True, "stream_options": {"include_usage": True}}
"""How a request is sent while a consumer listens: streamed, with its usage in the last chunk."""


class _Assembled:
    """A streamed response, put together chunk by chunk into what a response sent without
    streaming is (its model, usage, finish reason and message), each piece of text and of a
    tool call told to `listener` as it comes."""

    def __init__(self, listener: Sink) -> None:
        self.listener = listener
        self.model: str | None = None
        self.usage: Any = None
        self.finish_reason: str | None = None
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.extra: dict[str, Any] = {}
        self.chunks = 0

    def take(self, chunk: Any) -> None:
        self.chunks += 1
        self.model = getattr(chunk, "model", None) or self.model
        if getattr(chunk, "usage", None) is not None:
            self.usage = chunk.usage
        for choice in getattr(chunk, "choices", None) or ():
            self.finish_reason = getattr(choice, "finish_reason", None) or self.finish_reason
            delta = getattr(choice, "delta", None)
            if delta is None:
                continue
            if getattr(delta, "content", None):
                self.text.append(delta.content)
                self.listener(TextDelta(delta.content))
            if getattr(delta, "refusal", None):
                self.refusal.append(delta.refusal)
            _gather(self.extra, _extras(delta))
            for piece in getattr(delta, "tool_calls", None) or ():
                call = self.calls.setdefault(piece.index, {"id": None, "name": None, "arguments": [], "extra": {}})
                _gather(call["extra"], _extras(piece))
                function = getattr(piece, "function", None)
                name = getattr(function, "name", None)
                arguments = getattr(function, "arguments", None) or ""
                call["id"] = getattr(piece, "id", None) or call["id"]
                call["name"] = name or call["name"]
                call["arguments"].append(arguments)
                self.listener(ToolCallDelta(piece.index, getattr(piece, "id", None), name, arguments))

    def response(self) -> Any:
        """The response as one sent without streaming reads (`_message_of`, `_call_of`).

        Raises:
            ModelError: the stream held no chunk with a choice.
        """
        if not self.chunks:
            raise ModelError("the model's endpoint streamed no chunk")
        from types import SimpleNamespace

        calls = [SimpleNamespace(id=call["id"], function=SimpleNamespace(name=call["name"],
                                                                          arguments="".join(call["arguments"])),
                                 extra=call["extra"])
                 for _, call in sorted(self.calls.items())]
        message = SimpleNamespace(content="".join(self.text) or None, refusal="".join(self.refusal) or None,
                                  tool_calls=calls or None, extra=self.extra)
        choice = SimpleNamespace(message=message, finish_reason=self.finish_reason)
        return SimpleNamespace(choices=[choice], usage=self.usage, model=self.model)


def decided(policy: Any, goal: str, state: LoopState) -> Any:
    """A model policy's decision made by sending its requests itself (its `requests` and
    `send`), outside a loop's journal: awaitable where the caller can await."""
    if not can_await():  # run(), even in a thread whose event loop runs (Jupyter): the sync client
        return complete(_decide(policy, goal, state))
    return _decide(policy, goal, state)


async def _decide(policy: Any, goal: str, state: LoopState) -> Decision:
    """Send each request `requests` makes, awaiting its answer when it is awaitable."""
    steps = policy.requests(goal, state)
    reply = None
    while True:
        try:
            request = steps.send(reply)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        reply = policy.send(request)
        if inspect.isawaitable(reply):
            reply = await reply


def _gather(into: dict[str, Any], pieces: Mapping[str, Any]) -> None:
    """Pieces of a streamed reply's own fields put together: text as it comes, one after
    another (`reasoning_content`), anything else as last sent (a signature)."""
    for key, piece in pieces.items():
        into[key] = into.get(key, "") + piece if isinstance(piece, str) and isinstance(into.get(key, ""), str) \
            else piece


def _message_of(response: Any) -> Any:
    """The assistant message of a chat-completions response.

    Raises:
        ModelError: the response is not one (a text body, no `choices`, an empty list, a
            choice without a message).
    """
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list):
        raise ModelError(f"the model's endpoint answered without choices: {str(response)[:200]!r}")
    if not choices:
        raise ModelError("the model's endpoint answered with an empty list of choices")
    message = getattr(choices[0], "message", None)
    if message is None:
        raise ModelError("the model's endpoint answered with a choice that has no message")
    return message


def _call_of(response: Any, started: float, seconds: float) -> ModelCall:
    """What one response cost (its `usage`: prompt, completion and cached tokens), which
    model answered, why it stopped, and when it was asked and for how long."""
    usage = getattr(response, "usage", None)
    details = getattr(usage, "prompt_tokens_details", None)
    choices = getattr(response, "choices", None) or [None]

    def count(value: Any) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0

    return ModelCall(count(getattr(usage, "prompt_tokens", 0)), count(getattr(usage, "completion_tokens", 0)),
                     count(getattr(details, "cached_tokens", 0)), getattr(response, "model", None),
                     started, seconds, getattr(choices[0], "finish_reason", None))


def _async_twin(client: Any) -> Any:
    """An `openai.AsyncOpenAI` talking to the endpoint `client` (an `openai.OpenAI`) talks
    to, with its key, organization, project, timeout, retries and headers: `arun` must
    reach the endpoint the user configured, never the environment's.

    Raises:
        UsageError: `client` is not an `openai.OpenAI`, so its endpoint cannot be read.
    """
    openai = _openai()
    if not isinstance(client, openai.OpenAI):
        raise UsageError(f"ChatPolicy was given a client of type {type(client).__name__}, whose endpoint forge "
                         "cannot read for arun(): pass async_client= as well")
    return openai.AsyncOpenAI(api_key=client.api_key, base_url=client.base_url, organization=client.organization,
                              project=client.project, timeout=client.timeout, max_retries=client.max_retries,
                              default_headers=dict(client._custom_headers) or None,
                              default_query=dict(client._custom_query) or None)


def _openai() -> Any:
    """The `openai` client module, imported when a `ChatPolicy` first talks to its endpoint
    (a native policy built on this one needs none).

    Raises:
        ImportError: it is not installed, saying how to install it.
    """
    return extra_module("openai", "llm", "ChatPolicy")


def _final_answer_tool(output: Output) -> dict[str, Any]:
    """The tool a model gives a typed answer with, where it has no structured output."""
    return {"type": "function", "function": {
        "name": FINAL_ANSWER,
        "description": (f"Give your final answer, a {output.name}, once the work is done. "
                        + str(output.schema.get("description") or "")).strip(),
        "parameters": output.for_model(),
    }}


def _naming_endpoint(error: Exception, client: Any) -> Exception:
    """`error` (the openai client's: the endpoint could not be reached or did not answer in
    time), its message naming the endpoint's URL, which openai's own leaves out; its type and
    its cause kept, so code that catches it still does."""
    url = getattr(client, "base_url", None)
    if url is not None and str(url) not in str(error):
        said = f"{error.args[0] if error.args else error} (the model endpoint at {url})"
        error.args = (said, *error.args[1:])
        if hasattr(error, "message"):
            error.message = said
    return error


def _pending_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calls of the last assistant message that no tool message has answered yet."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "assistant":
            answered = {m.get("tool_call_id") for m in messages[index + 1:] if m.get("role") == "tool"}
            return [c for c in message.get("tool_calls") or () if c["id"] not in answered]
    return []


def _as_message(reply: Any) -> dict[str, Any]:
    """The assistant's message as the journal keeps it and the next request sends it back:
    as the provider sent it, fields forge does not know included (a reasoning model's
    `reasoning_content`, Gemini's `extra_content.google.thought_signature` on a tool call),
    since a provider may need them back to go on (Gemini answers a request without its
    signature with a 4xx; a reasoning model loses its reasoning)."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if getattr(reply, "refusal", None):
        message["refusal"] = reply.refusal
    message.update(_extras(reply))
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": call.id, "type": "function",
             "function": {"name": call.function.name, "arguments": call.function.arguments, **_extras(call.function)},
             **_extras(call)}
            for call in reply.tool_calls
        ]
    return message


_NOT_SENT_BACK = frozenset({"role", "content", "refusal", "tool_calls", "function_call", "audio", "annotations",
                            "id", "type", "function", "name", "arguments", "index"})
"""Fields a reply has that forge writes itself, or that a request does not take back."""


def _extras(value: Any) -> dict[str, Any]:
    """The fields of a reply's part the openai client has no name for (pydantic's
    `model_extra`; a streamed reply's, gathered as it came: `extra`), without empty ones."""
    extra = getattr(value, "model_extra", None)
    if not isinstance(extra, dict):
        extra = getattr(value, "extra", None)
    if not isinstance(extra, dict):
        return {}
    return {key: item for key, item in extra.items() if item is not None and key not in _NOT_SENT_BACK}


def _content_of(observation: Observation) -> str:
    payload = observation.payload
    if observation.status != "ok":
        return f"error: {payload}"
    if isinstance(payload, str):
        text = payload
    else:
        try:
            text = json.dumps(payload, default=str)
        except (TypeError, ValueError):
            text = repr(payload)
    if observation.repeat_of is not None:
        earlier = f"step {observation.repeat_of}" if observation.repeat_of else "an earlier run"
        return (f"not run again: this exact call already ran at {earlier}, and a side effect runs once; "
                f"what it returned then: {text}")
    return text
