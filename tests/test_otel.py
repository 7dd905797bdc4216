"""OpenTelemetry: a span per run, a child span per transition, on a real demo run; the GenAI
semantic conventions (pinned: forge.observe.otel.SEMCONV_VERSION) for agent, tool and chat
spans and the GenAI metrics, checked with the SDK's in-memory exporters."""

import pytest

pytest.importorskip("opentelemetry.sdk", reason="opentelemetry-sdk is a test dependency: python3 tasks.py test installs it")

from builders import intent, scripted_loop, tool
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from forge import Hooks, TransitionCallbacks
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
    children = [s for s in finished if s.parent is not None and s.name.startswith("forge.transition ")]
    assert root.name == "invoke_agent single_agent"
    assert root.attributes["forge.reason"] == "verified_success" and root.attributes["forge.steps"] == result.steps
    assert all(c.parent.span_id == root.context.span_id and c.context.trace_id == root.context.trace_id
               for c in finished if c is not root)
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
                         hooks=Hooks(callbacks=TransitionCallbacks.of(before={"call": broken})))
    result = loop.run("goal", observers=[OpenTelemetryObserver(tracer)])
    assert result.reason == "fatal_error"
    failed = next(s for s in exporter.get_finished_spans() if s.attributes.get("forge.failed"))
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.attributes["forge.failed"].startswith("before call")
    (exception,) = [e for e in failed.events if e.name == "exception"]
    assert exception.attributes["exception.message"] == "callback broke"
    root = next(s for s in exporter.get_finished_spans() if s.parent is None)
    assert root.status.status_code is StatusCode.ERROR


# --- the GenAI semantic conventions ------------------------------------------------------

import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from chat_server import ChatServer, reply  # noqa: E402
from models import REASON, llm  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.trace import SpanKind  # noqa: E402

from forge import AgentLoop, Finish, Intent, TransientToolError  # noqa: E402
from forge import tool as forge_tool  # noqa: E402
from forge.observe.otel import SEMCONV_VERSION  # noqa: E402

AGENT = {"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.agent.name", "gen_ai.conversation.id",
         "gen_ai.request.model", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"}
TOOL = {"gen_ai.operation.name", "gen_ai.tool.name", "gen_ai.tool.call.id", "gen_ai.tool.type"}
CHAT = {"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model", "gen_ai.response.model",
        "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.response.finish_reasons"}


@pytest.fixture
def telemetry():
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    meters = MeterProvider(metric_readers=[reader])
    yield exporter, reader, provider.get_tracer("forge-test"), meters.get_meter("forge-test")
    provider.shutdown()
    meters.shutdown()


FAILS_ONCE = []


@forge_tool
def lookup(city: str) -> str:
    """Look up a city."""
    if not FAILS_ONCE:
        FAILS_ONCE.append(city)
        raise TransientToolError("try again")
    return f"{city}: sunny"


def _chat_run(telemetry, **observer):
    exporter, reader, tracer, meter = telemetry
    FAILS_ONCE.clear()
    with ChatServer([reply(None, ("call_7", "lookup", {"city": "Oslo"})) | {"_usage": {"prompt_tokens": 40,
                                                                                         "completion_tokens": 6}},
                     reply("Oslo is sunny.") | {"_usage": {"prompt_tokens": 60, "completion_tokens": 4}}]) as server:
        openai = pytest.importorskip("openai", reason=REASON)
        policy = llm().ChatPolicy("test-model", client=openai.OpenAI(base_url=server.url, api_key="test"),
                                  system="Be brief.")
        loop = AgentLoop([lookup], policy, lambda o: o.tool_name == "finish",
                         hooks=Hooks(redact=lambda tool, field, value: "***" if field == "arguments" else value))
        result = loop.run("weather in Oslo?", observers=[OpenTelemetryObserver(tracer, meter=meter, **observer)])
    return result, exporter.get_finished_spans(), reader


def test_the_pinned_conventions_are_named():
    assert SEMCONV_VERSION == "semantic-conventions-genai v0.1.0"


def test_a_chat_run_is_an_invoke_agent_span_with_tool_and_chat_children(telemetry):
    result, spans, _ = _chat_run(telemetry)
    (root,) = [s for s in spans if s.parent is None]
    assert (root.name, root.kind) == ("invoke_agent single_agent", SpanKind.INTERNAL)
    assert set(root.attributes) >= AGENT
    assert (root.attributes["gen_ai.operation.name"], root.attributes["gen_ai.provider.name"],
            root.attributes["gen_ai.request.model"]) == ("invoke_agent", "openai", "test-model")
    assert (root.attributes["gen_ai.usage.input_tokens"], root.attributes["gen_ai.usage.output_tokens"]) == (100, 10)
    assert root.attributes["gen_ai.conversation.id"] == result.trace.run_id
    assert all(s.parent.span_id == root.context.span_id for s in spans if s is not root)


def test_each_tool_attempt_is_an_execute_tool_span_with_the_models_call_id(telemetry):
    _, spans, _ = _chat_run(telemetry)
    tools = sorted((s for s in spans if s.name.startswith("execute_tool ")), key=lambda s: s.start_time)
    assert [s.name for s in tools] == ["execute_tool lookup", "execute_tool lookup"]
    for span in tools:
        assert span.kind is SpanKind.INTERNAL and set(span.attributes) >= TOOL
        assert (span.attributes["gen_ai.tool.name"], span.attributes["gen_ai.tool.call.id"],
                span.attributes["gen_ai.tool.type"]) == ("lookup", "call_7", "function")
    assert tools[0].attributes["error.type"] == "TransientToolError"
    assert tools[0].status.status_code is StatusCode.ERROR and "error.type" not in tools[1].attributes


def test_each_model_call_is_a_chat_client_span_with_its_usage_and_its_own_times(telemetry):
    _, spans, _ = _chat_run(telemetry)
    chats = sorted((s for s in spans if s.name.startswith("chat ")), key=lambda s: s.start_time)
    assert [s.name for s in chats] == ["chat test-model", "chat test-model"]
    for span in chats:
        assert span.kind is SpanKind.CLIENT and set(span.attributes) >= CHAT
        assert span.start_time < span.end_time
    assert [(s.attributes["gen_ai.usage.input_tokens"], s.attributes["gen_ai.usage.output_tokens"]) for s in chats] == [
        (40, 6), (60, 4)]
    assert [list(s.attributes["gen_ai.response.finish_reasons"]) for s in chats] == [["tool_calls"], ["stop"]]
    tool = next(s for s in spans if s.name.startswith("execute_tool "))
    assert chats[0].end_time <= tool.start_time  # the call that asked for the tool came before it


def test_content_is_not_recorded_unless_asked(telemetry):
    _, spans, _ = _chat_run(telemetry)
    keys = {k for s in spans for k in s.attributes}
    assert not keys & {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments", "forge.goal"}


def test_content_when_asked_is_recorded_after_the_loops_redact(telemetry):
    _, spans, _ = _chat_run(telemetry, capture_content=True)
    tool = next(s for s in spans if s.name.startswith("execute_tool "))
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == "***"
    first = min((s for s in spans if s.name.startswith("chat ")), key=lambda s: s.start_time)
    sent = json.loads(first.attributes["gen_ai.input.messages"])
    assert [m["role"] for m in sent] == ["system", "user"]
    assert sent[1]["parts"] == [{"type": "text", "content": "weather in Oslo?"}]
    said = json.loads(first.attributes["gen_ai.output.messages"])
    assert said[0]["parts"][0]["type"] == "tool_call" and json.loads(said[0]["parts"][0]["arguments"]) == "***"


def test_the_genai_metrics_are_recorded(telemetry):
    _, _, reader = _chat_run(telemetry)
    points = {}
    for resource in reader.get_metrics_data().resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points[metric.name] = (metric.unit, list(metric.data.data_points))
    assert set(points) == {"gen_ai.client.token.usage", "gen_ai.client.operation.duration",
                           "gen_ai.execute_tool.duration"}
    unit, tokens = points["gen_ai.client.token.usage"]
    assert unit == "{token}"
    by_type = {p.attributes["gen_ai.token.type"]: p.sum for p in tokens}
    assert by_type == {"input": 100, "output": 10}
    assert points["gen_ai.client.operation.duration"][0] == "s"
    assert sum(p.count for p in points["gen_ai.execute_tool.duration"][1]) == 2


def test_an_mcp_tool_call_carries_the_execute_tool_spans_context_in_its_meta(telemetry):
    from forge.mcp import MCPServer

    exporter, _, tracer, meter = telemetry
    with MCPServer.stdio(sys.executable, str(Path(__file__).with_name("mcp_meta_server.py")), timeout=60) as server:
        (meta,) = server.tools()
        loop = AgentLoop([meta], lambda goal, state: Finish(state.observations[-1].payload) if state.observations
                         else Intent.call("meta"), lambda o: o.tool_name == "finish")
        result = loop.run("show the meta", observers=[OpenTelemetryObserver(tracer, meter=meter)])
    received = json.loads(result.answer) if isinstance(result.answer, str) else result.answer
    tool = next(s for s in exporter.get_finished_spans() if s.name == "execute_tool meta")
    trace_id, span_id = f"{tool.context.trace_id:032x}", f"{tool.context.span_id:016x}"
    assert received["traceparent"].startswith(f"00-{trace_id}-{span_id}-")  # then the trace flags


def test_each_priced_model_call_and_the_run_carry_what_they_cost_in_dollars(telemetry):
    from forge import Limits
    from forge.records.pricing import Price

    exporter, _, tracer, meter = telemetry
    openai = pytest.importorskip("openai", reason=REASON)
    costly = {"_usage": {"prompt_tokens": 1_000_000, "completion_tokens": 100_000}}
    with ChatServer([reply(None, ("c1", "lookup", {"city": "Oslo"})) | costly, reply("Sunny.") | costly]) as server:
        policy = llm().ChatPolicy("house-model", client=openai.OpenAI(base_url=server.url, api_key="test"))
        loop = AgentLoop([lookup], policy, lambda o: o.tool_name == "finish",
                         limits=Limits(prices={"house-model": Price(input=2.0, output=10.0)}))
        FAILS_ONCE[:] = ["already"]
        loop.run("weather?", observers=[OpenTelemetryObserver(tracer, meter=meter)])
    spans = exporter.get_finished_spans()
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert [s.attributes["forge.cost_usd"] for s in chats] == [3.0, 3.0]  # $2 in + $1 out, by the loop's prices
    (root,) = [s for s in spans if s.parent is None]
    assert "forge.cost_usd" not in {k for s in spans if s.name.startswith("execute_tool") for k in s.attributes}
    assert root.attributes["forge.cost_usd"] == 6.0
