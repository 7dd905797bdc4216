"""OpenTelemetry as an observer (extra `forge[otel]`: opentelemetry-api only at run time).

One span per run (`forge.run <machine>`), a child span per transition
(`forge.transition <source>`) with the transition's facts as attributes, and a failing
hook's exception recorded on its transition span and the run span, both with status ERROR.
What exports the spans (an SDK, a collector) is the application's choice, as with logging.

Attributes of a transition span: `forge.state`, `forge.trigger`, `forge.dest`,
`forge.verdict`, `forge.guards` ("name=true" per guard evaluated), `forge.step`, and when
the stage called a tool `forge.tool`, `forge.observation.status`, `forge.attempts`,
`forge.replayed`; each tool attempt is an event `forge.tool_attempt` on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from forge.observe import LoopObserver, RunView, ToolAttempt

try:
    from opentelemetry import trace as otel_trace
except ImportError as missing:  # pragma: no cover - exercised only without the extra
    raise ImportError("forge.observe.otel needs opentelemetry-api: install forge with its otel extra "
                      "(pip install 'forge-fsm[otel]') or pip install opentelemetry-api") from missing

if TYPE_CHECKING:
    from forge.machine.trace import TransitionRecord
    from forge.result import LoopResult

__all__ = ["OpenTelemetryObserver"]


class OpenTelemetryObserver(LoopObserver):
    """Spans for runs and transitions on `tracer` (default: the global tracer provider's
    tracer named `forge`). Safe to share between loops, threads and concurrent `arun`s:
    each run's spans are kept with the run and dropped with it."""

    def __init__(self, tracer: Any = None) -> None:
        self.tracer = tracer if tracer is not None else otel_trace.get_tracer("forge")
        self._runs: WeakKeyDictionary[RunView, Any] = WeakKeyDictionary()
        self._transitions: WeakKeyDictionary[RunView, Any] = WeakKeyDictionary()

    def run_started(self, run: RunView) -> None:
        self._runs[run] = self.tracer.start_span(
            f"forge.run {run.machine}", attributes={"forge.goal": run.goal, "forge.machine": run.machine}
        )

    def transition_started(self, run: RunView, state: str) -> None:
        self._transitions[run] = self.tracer.start_span(
            f"forge.transition {state}", context=_context_of(self._runs.get(run)), attributes={"forge.state": state}
        )

    def tool_attempt(self, run: RunView, attempt: ToolAttempt) -> None:
        span = self._transitions.get(run)
        if span is not None:
            attributes: dict[str, Any] = {"forge.tool": attempt.tool, "forge.attempt": attempt.number,
                                          "forge.delay_before_s": attempt.delay_before}
            if attempt.error is not None:
                attributes["forge.error"] = f"{type(attempt.error).__name__}: {attempt.error}"
            span.add_event("forge.tool_attempt", attributes)

    def transition_finished(self, run: RunView, record: TransitionRecord) -> None:
        span = self._transitions.pop(run, None)
        if span is not None:
            span.set_attributes(_attributes(record))
            span.end()

    def transition_failed(self, run: RunView, record: TransitionRecord, error: BaseException) -> None:
        span = self._transitions.pop(run, None)
        if span is None:  # it failed after its span ended (transition_finished raised)
            span = self.tracer.start_span(f"forge.transition {record.source}",
                                          context=_context_of(self._runs.get(run)))
        span.set_attributes(_attributes(record))
        span.set_attribute("forge.failed", str(record.detail.get("failed", "")))
        span.record_exception(error)
        span.set_status(otel_trace.Status(otel_trace.StatusCode.ERROR, str(record.detail.get("error", ""))))
        span.end()
        run_span = self._runs.get(run)
        if run_span is not None:
            run_span.record_exception(error)

    def run_finished(self, run: RunView, result: LoopResult) -> None:
        span = self._runs.pop(run, None)
        if span is None:
            return
        span.set_attributes({"forge.reason": str(result.reason), "forge.outcome": result.outcome or "",
                             "forge.steps": result.steps, "forge.transitions": len(result.trace)})
        if result.outcome == "failure":
            span.set_status(otel_trace.Status(otel_trace.StatusCode.ERROR, str(result.reason)))
        span.end()


def _context_of(span: Any) -> Any:
    return otel_trace.set_span_in_context(span) if span is not None else None


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
