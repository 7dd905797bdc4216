"""OpenTelemetry as an observer (extra `forge[otel]`: opentelemetry-api only at run time),
to the GenAI semantic conventions, so that backends which know them show a forge run as
the agent run it is.

Pinned version: `SEMCONV_VERSION`, the first standalone release of the conventions
(open-telemetry/semantic-conventions-genai, `docs/gen-ai/`), at Development status. Spans:

- `invoke_agent {agent}` (INTERNAL), the run's root: `gen_ai.operation.name`,
  `gen_ai.provider.name`, `gen_ai.agent.name`, `gen_ai.conversation.id` (the run id),
  `gen_ai.request.model` when the policy names one; at the end `gen_ai.usage.input_tokens`,
  `gen_ai.usage.output_tokens`, and for a run that failed `error.type` (its stop reason)
  and status ERROR.
- `execute_tool {tool}` (INTERNAL) per tool attempt, child of the agent span and current
  while the handler runs (so an MCP call carries it in `params._meta`):
  `gen_ai.operation.name`, `gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.type`
  ("function": forge runs the tool), `gen_ai.tool.description`, and on failure
  `error.type` (the exception's class) and status ERROR.
- `chat {model}` (CLIENT) per model call of a policy that records its calls' usage
  (`ChatPolicy`), child of the agent span, with the call's own start and end:
  `gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model`,
  `gen_ai.response.model`, `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens`,
  `gen_ai.usage.cache_read.input_tokens`, `gen_ai.response.finish_reasons`, and what the
  call cost in US dollars, `forge.cost_usd`, when it is priced (`forge.records.pricing`; the run's
  root span has the run's).
- `forge.transition {state}` (INTERNAL) per transition, child of the agent span, with
  the transition's facts as `forge.*` attributes (`forge.state`, `forge.trigger`,
  `forge.dest`, `forge.verdict`, `forge.guards`, `forge.step`, `forge.sequence`, and when
  the stage called a tool `forge.tool`, `forge.observation.status`, `forge.attempts`,
  `forge.replayed`; each attempt an event `forge.tool_attempt`). A failing hook's
  exception is recorded on its transition span and the agent span.

Content (goal, messages, tool arguments) is recorded only with `capture_content=True`,
after the loop's `redact`: `gen_ai.input.messages` / `gen_ai.output.messages` on chat
spans, `gen_ai.tool.call.arguments` on tool spans, `forge.goal` on the agent span.

Metrics (histograms, with `meter`, default the global meter provider's): `gen_ai.client.
token.usage` ({token}, by `gen_ai.token.type` input / output), `gen_ai.client.operation.
duration` (s) per model call, `gen_ai.execute_tool.duration` (s) per tool attempt.
What exports them (an SDK, a collector) is the application's choice, as with logging.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from forge.observe import LoopObserver, RunView, ToolAttempt
from forge.records.details import failure_of
from forge.records.pricing import cost_of
from forge.records.trace import error_text, redacted_messages
from forge.records.usage import USAGE_KEY, ModelCall

try:
    from opentelemetry import context as otel_context
    from opentelemetry import metrics as otel_metrics
    from opentelemetry import trace as otel_trace
except ImportError as missing:  # pragma: no cover - exercised only without the extra
    raise ImportError("forge.observe.otel needs opentelemetry-api: install forge with its otel extra "
                      "(pip install 'forge-fsm[otel]') or pip install opentelemetry-api") from missing

if TYPE_CHECKING:
    from forge.records.trace import TransitionRecord
    from forge.result import LoopResult

__all__ = ["SEMCONV_VERSION", "OpenTelemetryObserver"]

SEMCONV_VERSION = "semantic-conventions-genai v0.1.0"
"""The GenAI semantic conventions forge follows (names, kinds and attributes)."""

PROVIDER = "forge"
"""`gen_ai.provider.name` of a run whose policy names no provider (no model behind it)."""


@dataclass
class _RunSpans:
    """What the observer keeps of one run while it runs."""

    agent: Any
    attributes: dict[str, Any]
    transition: Any = None
    tool: Any = None
    tool_name: str = ""
    tool_token: Any = None
    tool_started: float = 0.0
    messages_read: int = 0
    conversation: list[dict[str, Any]] = field(default_factory=list)
    prices: Any = None  # the loop's own prices (`Limits(prices=...)`), for each call's cost


class OpenTelemetryObserver(LoopObserver):
    """Spans and metrics of runs on `tracer` and `meter` (default: the global providers'
    named `forge`), to the GenAI semantic conventions (see the module). `agent_name` names
    the agent (default: the loop definition's name); `capture_content` records messages,
    arguments and the goal (after the loop's `redact`). Safe to share between loops,
    threads and concurrent `arun`s: each run's spans are kept with the run, dropped with it."""

    def __init__(self, tracer: Any = None, *, meter: Any = None, agent_name: str | None = None,
                 capture_content: bool = False) -> None:
        self.tracer = tracer if tracer is not None else otel_trace.get_tracer("forge")
        meter = meter if meter is not None else otel_metrics.get_meter("forge")
        self.agent_name, self.capture_content = agent_name, capture_content
        self._token_usage = meter.create_histogram("gen_ai.client.token.usage", unit="{token}",
                                                   description="Number of input and output tokens used")
        self._operation_duration = meter.create_histogram("gen_ai.client.operation.duration", unit="s",
                                                          description="GenAI operation duration")
        self._tool_duration = meter.create_histogram("gen_ai.execute_tool.duration", unit="s",
                                                     description="Duration of a tool execution")
        self._runs: WeakKeyDictionary[RunView, _RunSpans] = WeakKeyDictionary()

    def run_started(self, run: RunView) -> None:
        policy = getattr(getattr(run, "config", None), "policy", None)
        name = self.agent_name or run.machine
        attributes: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent",
                                      "gen_ai.provider.name": str(getattr(policy, "provider", None) or PROVIDER),
                                      "gen_ai.agent.name": name, "forge.machine": run.machine}
        run_id = getattr(run.trace, "run_id", None)
        if run_id:
            attributes["gen_ai.conversation.id"] = run_id
        model = getattr(policy, "model", None)
        if isinstance(model, str):
            attributes["gen_ai.request.model"] = model
        if self.capture_content:
            attributes["forge.goal"] = run.goal
        span = self.tracer.start_span(f"invoke_agent {name}", kind=otel_trace.SpanKind.INTERNAL, attributes=attributes)
        self._runs[run] = _RunSpans(span, attributes, messages_read=getattr(run, "first_message", 0),
                                    prices=getattr(getattr(run, "config", None), "prices", None))

    def transition_started(self, run: RunView, state: str) -> None:
        spans = self._runs.get(run)
        if spans is not None:
            spans.transition = self.tracer.start_span(f"forge.transition {state}", context=_under(spans.agent),
                                                      attributes={"forge.state": state})

    def tool_attempt_started(self, run: RunView, attempt: ToolAttempt) -> None:
        spans = self._runs.get(run)
        if spans is None:
            return
        intent, tools = run.intent, getattr(getattr(run, "config", None), "tools", {})
        tool = tools.get(attempt.tool)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": attempt.tool, "gen_ai.tool.type": "function",
            "gen_ai.tool.call.id": getattr(intent, "call_id", None) or f"{getattr(run.trace, 'run_id', '')}:{run.step}",
            "forge.attempt": attempt.number,
        }
        if tool is not None and tool.description:
            attributes["gen_ai.tool.description"] = tool.description
        if self.capture_content and intent is not None:
            redact = getattr(getattr(run, "config", None), "redact", None)
            arguments = intent.arguments if redact is None else redact(attempt.tool, "arguments", intent.arguments)
            attributes["gen_ai.tool.call.arguments"] = json.dumps(arguments, default=str)
        span = self.tracer.start_span(f"execute_tool {attempt.tool}", context=_under(spans.agent),
                                      kind=otel_trace.SpanKind.INTERNAL, attributes=attributes)
        spans.tool, spans.tool_name, spans.tool_started = span, attempt.tool, time.perf_counter()
        spans.tool_token = otel_context.attach(otel_trace.set_span_in_context(span))

    def tool_attempt(self, run: RunView, attempt: ToolAttempt) -> None:
        spans = self._runs.get(run)
        if spans is None:
            return
        if spans.transition is not None:
            event: dict[str, Any] = {"forge.tool": attempt.tool, "forge.attempt": attempt.number,
                                     "forge.delay_before_s": attempt.delay_before}
            if attempt.error is not None:
                event["forge.error"] = error_text(attempt.error)
            spans.transition.add_event("forge.tool_attempt", event)
        span, spans.tool = spans.tool, None
        if span is None:
            return
        if spans.tool_token is not None:
            otel_context.detach(spans.tool_token)
            spans.tool_token = None
        measured = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": attempt.tool}
        if attempt.error is not None:
            measured["error.type"] = type(attempt.error).__qualname__
            span.set_attribute("error.type", measured["error.type"])
            span.record_exception(attempt.error)
            span.set_status(otel_trace.Status(otel_trace.StatusCode.ERROR, str(attempt.error)[:200]))
        self._tool_duration.record(time.perf_counter() - spans.tool_started, measured)
        span.end()

    def transition_finished(self, run: RunView, record: TransitionRecord) -> None:
        spans = self._runs.get(run)
        if spans is None:
            return
        self._model_calls(run, spans)
        span, spans.transition = spans.transition, None
        if span is not None:
            span.set_attributes(_attributes(record))
            span.end()

    def transition_failed(self, run: RunView, record: TransitionRecord, error: BaseException) -> None:
        spans = self._runs.get(run)
        if spans is None:
            return
        if spans.tool is not None:  # a handler that raised past its attempt (an interrupt, a broken stage)
            self.tool_attempt(run, ToolAttempt(spans.tool_name, 0, 0.0, error))
        span, spans.transition = spans.transition, None
        if span is None:  # it failed after its span ended (transition_finished raised)
            span = self.tracer.start_span(f"forge.transition {record.source}", context=_under(spans.agent))
        span.set_attributes(_attributes(record))
        failed, why = failure_of(record) or ("", "")
        span.set_attribute("forge.failed", failed)
        span.record_exception(error)
        span.set_status(otel_trace.Status(otel_trace.StatusCode.ERROR, why))
        span.end()
        spans.agent.record_exception(error)

    def run_finished(self, run: RunView, result: LoopResult) -> None:
        spans = self._runs.pop(run, None)
        if spans is None:
            return
        self._model_calls(run, spans)
        span = spans.agent
        span.set_attributes({"forge.reason": str(result.reason), "forge.outcome": result.outcome or "",
                             "forge.steps": result.steps, "forge.transitions": len(result.trace),
                             "gen_ai.usage.input_tokens": result.usage.prompt_tokens,
                             "gen_ai.usage.output_tokens": result.usage.completion_tokens})
        cost = result.usage.cost_at(spans.prices) if result.usage.calls else None  # by the loop's prices, as each call's
        if cost is not None:
            span.set_attribute("forge.cost_usd", round(cost, 8))
        if result.outcome == "failure":
            span.set_attribute("error.type", str(result.reason))
            span.set_status(otel_trace.Status(otel_trace.StatusCode.ERROR, str(result.reason)))
        span.end()

    def _model_calls(self, run: RunView, spans: _RunSpans) -> None:
        """A `chat` span and metrics for each model call the policy recorded since the last
        look (an assistant message with its usage), with the call's own times."""
        messages = run.loop_state.messages
        if len(messages) <= spans.messages_read:
            return
        fresh = messages[spans.messages_read:]
        if self.capture_content:
            redact = getattr(getattr(run, "config", None), "redact", None)
            shown = fresh if redact is None else redacted_messages(fresh, redact, messages[:spans.messages_read])
        else:
            shown = fresh
        for message, visible in zip(fresh, shown, strict=True):
            if USAGE_KEY in message:
                self._chat_span(spans, ModelCall.from_json(message[USAGE_KEY]), visible)
            if self.capture_content:
                spans.conversation.append(visible)
        spans.messages_read = len(messages)

    def _chat_span(self, spans: _RunSpans, call: ModelCall, message: Mapping[str, Any]) -> None:
        model = call.request_model or call.model or "unknown"
        attributes: dict[str, Any] = {"gen_ai.operation.name": "chat",
                                      "gen_ai.provider.name": call.provider or spans.attributes["gen_ai.provider.name"],
                                      "gen_ai.request.model": model,
                                      "gen_ai.usage.input_tokens": call.prompt_tokens,
                                      "gen_ai.usage.output_tokens": call.completion_tokens}
        if call.model:
            attributes["gen_ai.response.model"] = call.model
        if call.cached_tokens:
            attributes["gen_ai.usage.cache_read.input_tokens"] = call.cached_tokens
        cost = cost_of(call, spans.prices)
        if cost is not None:
            attributes["forge.cost_usd"] = round(cost, 8)
        if call.finish_reason:
            attributes["gen_ai.response.finish_reasons"] = [call.finish_reason]
        if self.capture_content:
            attributes["gen_ai.input.messages"] = json.dumps(_parts(spans.conversation), default=str)
            attributes["gen_ai.output.messages"] = json.dumps(_parts([message], call.finish_reason), default=str)
        started = int(call.started * 1e9) if call.started is not None else None
        span = self.tracer.start_span(f"chat {model}", context=_under(spans.agent), kind=otel_trace.SpanKind.CLIENT,
                                      attributes=attributes, start_time=started)
        ended = int((call.started + call.seconds) * 1e9) if call.started is not None and call.seconds is not None \
            else None
        span.end(end_time=ended)
        measured: dict[str, Any] = {k: attributes[k] for k in ("gen_ai.operation.name", "gen_ai.provider.name",
                                                "gen_ai.request.model", "gen_ai.response.model") if k in attributes}
        self._token_usage.record(call.prompt_tokens, {**measured, "gen_ai.token.type": "input"})
        self._token_usage.record(call.completion_tokens, {**measured, "gen_ai.token.type": "output"})
        if call.seconds is not None:
            self._operation_duration.record(call.seconds, measured)


def _under(span: Any) -> Any:
    return otel_trace.set_span_in_context(span)


def _parts(messages: Sequence[Mapping[str, Any]], finish_reason: str | None = None) -> list[dict[str, Any]]:
    """Chat-completions messages in the conventions' message form: a role and typed parts."""
    out = []
    for message in messages:
        parts: list[dict[str, Any]] = []
        if message.get("content"):
            kind = "tool_call_response" if message.get("role") == "tool" else "text"
            parts.append({"type": kind, "id": message.get("tool_call_id"), "response": message["content"]}
                         if kind == "tool_call_response" else {"type": "text", "content": message["content"]})
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            parts.append({"type": "tool_call", "id": call.get("id"), "name": function.get("name"),
                          "arguments": function.get("arguments")})
        shaped: dict[str, Any] = {"role": message.get("role"), "parts": parts}
        if finish_reason is not None:
            shaped["finish_reason"] = finish_reason
        out.append(shaped)
    return out


def _attributes(record: TransitionRecord) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "forge.state": record.source,
        "forge.trigger": record.trigger,
        "forge.dest": record.dest,
        "forge.step": record.step,
        "forge.sequence": record.sequence,
        "forge.guards": [f"{g.name}={'true' if g.value else 'false'}" for g in record.guards],
    }
    if record.verdict is not None:
        attributes["forge.verdict"] = record.verdict
    detail = record.detail
    if "tool" in detail:
        attributes["forge.tool"] = str(detail["tool"])
    if "status" in detail:
        attributes["forge.observation.status"] = str(detail["status"])
    if "attempts" in detail:
        attributes["forge.attempts"] = int(detail["attempts"])
    if "replayed" in detail:
        attributes["forge.replayed"] = bool(detail["replayed"])
    return attributes
