"""OpenTelemetry: a span per run, a child span per transition, on a real demo run."""

import pytest

pytest.importorskip("opentelemetry.sdk", reason="opentelemetry-sdk is a test dependency: python3 tasks.py test installs it")

from builders import intent, scripted_loop, tool
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from forge import TransitionCallbacks
from forge.demo.scenarios import build_scenario
from forge.observe.otel import OpenTelemetryObserver


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter, provider.get_tracer("forge-test")
    provider.shutdown()


def test_a_demo_run_is_one_run_span_with_a_child_span_per_transition(spans, tmp_path):
    exporter, tracer = spans
    scenario = build_scenario("index", tmp_path)
    try:
        result = scenario.loop.run(scenario.goal, observers=[OpenTelemetryObserver(tracer)])
    finally:
        scenario.close()
    assert result.reason == "verified_success"
    finished = exporter.get_finished_spans()
    (root,) = [s for s in finished if s.parent is None]
    children = [s for s in finished if s.parent is not None]
    assert root.name == "forge.run single_agent"
    assert root.attributes["forge.reason"] == "verified_success" and root.attributes["forge.steps"] == result.steps
    assert all(c.parent.span_id == root.context.span_id and c.context.trace_id == root.context.trace_id
               for c in children)
    children.sort(key=lambda s: s.attributes["forge.sequence"])
    assert len(children) == len(result.trace)
    for span, record in zip(children, result.trace, strict=True):
        assert span.name == f"forge.transition {record.source}"
        assert (span.attributes["forge.state"], span.attributes["forge.trigger"], span.attributes["forge.dest"]) == (
            record.source, record.trigger, record.dest)
        assert list(span.attributes["forge.guards"]) == [f"{g.name}={str(g.value).lower()}" for g in record.guards]
        if record.verdict is not None:
            assert span.attributes["forge.verdict"] == record.verdict
    flaky = next(span for span, record in zip(children, result.trace, strict=True)
                 if record.source == "execute" and record.detail.get("attempts", 1) > 1)
    assert flaky.attributes["forge.tool"] == "analyse"
    assert flaky.attributes["forge.observation.status"] == "ok" and flaky.attributes["forge.attempts"] == 3
    assert [e.attributes["forge.attempt"] for e in flaky.events] == [1, 2, 3]
    assert "TransientToolError" in flaky.events[0].attributes["forge.error"]


def test_a_failing_hook_is_recorded_on_its_span_with_error_status(spans):
    exporter, tracer = spans

    def broken(event):
        raise RuntimeError("callback broke")

    loop = scripted_loop([tool("a")], [intent("a")], verify=lambda o: True,
                         callbacks=TransitionCallbacks.of(before={"call": broken}))
    result = loop.run("goal", observers=[OpenTelemetryObserver(tracer)])
    assert result.reason == "fatal_error"
    failed = next(s for s in exporter.get_finished_spans() if s.attributes.get("forge.failed"))
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.attributes["forge.failed"].startswith("before call")
    (exception,) = [e for e in failed.events if e.name == "exception"]
    assert exception.attributes["exception.message"] == "callback broke"
    root = next(s for s in exporter.get_finished_spans() if s.parent is None)
    assert root.status.status_code is StatusCode.ERROR
