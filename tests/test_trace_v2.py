"""Trace v2: run id, wall-clock times, arguments, payload summaries, attempts, caps, redaction."""

import json
import time

import pytest
from builders import Recorder, intent, scripted_loop, tool

from forge import Clocks, Hooks, Retry, TransientToolError, read_trace, write_trace
from forge.records.trace import ARGUMENTS_LIMIT, PAYLOAD_LIMIT, TraceFormatError, summary


def two_step_run(**options):
    loop = scripted_loop([tool("a", handler=Recorder({"rows": [1, 2]}), required={"path"}),
                          tool("b", handler=Recorder("done"))],
                         [intent("a", path="x.md"), intent("b")], verify=lambda o: o.tool_name == "b", **options)
    return loop.run("goal")


def test_every_record_names_the_run_it_belongs_to():
    result = two_step_run()
    ids = {record.run_id for record in result.trace}
    assert len(ids) == 1 and len(ids.pop()) == 32


def test_a_run_id_given_to_run_is_the_one_recorded():
    assert {r.run_id for r in two_step_run().trace} != {"order-17"}
    loop = scripted_loop([tool("a")], [intent("a")], verify=lambda o: True)
    assert {r.run_id for r in loop.run("goal", run_id="order-17").trace} == {"order-17"}


def test_a_blank_run_id_is_refused_naming_it():
    loop = scripted_loop([tool("a")], [intent("a")], verify=lambda o: True)
    with pytest.raises(ValueError, match="run_id"):
        loop.run("goal", run_id=" ")


def test_records_carry_wall_clock_times_in_firing_order():
    before = time.time()
    result = two_step_run()
    after = time.time()
    times = [record.at for record in result.trace]
    assert times == sorted(times)
    assert before - 0.01 <= times[0] and times[-1] <= after + 0.01


def test_the_select_record_carries_the_intents_arguments_as_json():
    select = two_step_run().trace[0]
    assert select.detail["tool"] == "a" and json.loads(select.detail["arguments"]) == {"path": "x.md"}


def test_the_record_that_made_the_observation_summarises_its_payload():
    records = two_step_run().trace
    observed = [r for r in records if "payload" in r.detail]
    assert [r.source for r in observed] == ["observe", "observe"]
    assert json.loads(observed[0].detail["payload"]) == {"rows": [1, 2]}
    assert observed[1].detail["payload"] == "done"


def test_an_error_payload_is_summarised_as_its_type_and_message():
    loop = scripted_loop([tool("a", handler=Recorder(ValueError("disk full")), errors="report")], [intent("a")])
    observed = next(r for r in loop.run("goal").trace if "payload" in r.detail)
    assert observed.detail["payload"] == "ToolError: ValueError: disk full"


def test_each_attempt_of_a_retried_tool_is_recorded_with_its_error_and_the_wait_before_it():
    handler = Recorder(TransientToolError("busy"), TransientToolError("still busy"), "ok")
    loop = scripted_loop([tool("a", handler=handler)], [intent("a")], verify=lambda o: True,
                         retry=Retry(base_delay=0.5), clocks=Clocks(random=lambda: 1.0, sleep=lambda s: None))
    execute = loop.run("goal").trace[1]
    assert execute.detail["attempts"] == 3
    tries = execute.detail["tries"]
    assert [t["attempt"] for t in tries] == [1, 2, 3]
    assert [t["error"] for t in tries] == ["TransientToolError: busy", "TransientToolError: still busy", None]
    assert tries[0]["delay_s"] == 0.0 and tries[1]["delay_s"] > 0 and tries[2]["delay_s"] > 0


def test_a_tool_tried_once_has_no_tries_list():
    assert "tries" not in two_step_run().trace[1].detail


def test_long_arguments_are_cut_at_the_limit_saying_how_much():
    loop = scripted_loop([tool("a", required={"text"})], [intent("a", text="x" * 50_000)], verify=lambda o: True)
    arguments = loop.run("goal").trace[0].detail["arguments"]
    assert arguments.startswith('{"text": "xxx') and "more characters)" in arguments
    assert len(arguments) < ARGUMENTS_LIMIT + 40


def test_a_long_payload_is_cut_at_the_limit():
    loop = scripted_loop([tool("a", handler=Recorder("y" * 100_000))], [intent("a")], verify=lambda o: True)
    payload = next(r for r in loop.run("goal").trace if "payload" in r.detail).detail["payload"]
    assert payload.startswith("yyy") and "99,000 more characters" in payload


def test_redact_sees_arguments_and_payloads_and_the_trace_keeps_what_it_returns():
    seen = []

    def redact(tool_name, field, value):
        seen.append((tool_name, field))
        if field == "arguments":
            return {k: "***" if k == "token" else v for k, v in value.items()}
        return "<payload hidden>"

    loop = scripted_loop([tool("a", handler=Recorder("secret result"), required={"token", "page"})],
                         [intent("a", token="s3cr3t", page=2)],
                         verify=lambda o: True, hooks=Hooks(redact=redact))
    result = loop.run("goal")
    lines = "".join(json.dumps(r.to_json()) for r in result.trace)
    assert "s3cr3t" not in lines and "secret result" not in lines
    assert json.loads(result.trace[0].detail["arguments"]) == {"token": "***", "page": 2}
    assert "<payload hidden>" in lines
    assert ("a", "arguments") in seen and ("a", "payload") in seen
    assert result.state.observations[0].payload == "secret result"  # the run itself is untouched


def test_a_redact_that_raises_on_arguments_ends_the_run_naming_it():
    def redact(tool_name, field, value):
        raise RuntimeError("vault locked")

    loop = scripted_loop([tool("a")], [intent("a")], verify=lambda o: True, hooks=Hooks(redact=redact))
    result = loop.run("goal")
    assert result.reason == "fatal_error"
    assert result.trace[-1].detail["failed"] == "redact" and "vault locked" in result.trace[-1].detail["error"]


def test_a_payload_that_redact_cannot_handle_is_not_shown():
    def redact(tool_name, field, value):
        if field == "payload":
            raise RuntimeError("vault locked")
        return value

    loop = scripted_loop([tool("a", handler=Recorder("secret"))], [intent("a")], verify=lambda o: True,
                         hooks=Hooks(redact=redact))
    payload = next(r for r in loop.run("goal").trace if "payload" in r.detail).detail["payload"]
    assert payload.startswith("<not shown: redact raised RuntimeError: vault locked")


def test_a_redact_that_is_not_callable_is_refused():
    with pytest.raises(ValueError, match="redact must be callable"):
        scripted_loop([tool("a")], [intent("a")], hooks=Hooks(redact="mask"))


def test_v2_round_trips_run_id_time_arguments_and_payload(tmp_path):
    trace = two_step_run().trace
    back = read_trace(write_trace(trace, tmp_path / "run.jsonl"))
    assert back == trace
    for original, read in zip(trace, back, strict=True):
        assert read.run_id == original.run_id
        assert read.at == pytest.approx(original.at, abs=1e-5)
        assert read.detail == original.detail


def test_a_v2_line_writes_its_time_as_iso_8601_utc(tmp_path):
    line = json.loads((write_trace(two_step_run().trace, tmp_path / "r.jsonl")).read_text().splitlines()[0])
    assert line["v"] == 2 and line["at"].endswith("Z") and line["at"][4] == "-" and line["at"][10] == "T"


def test_a_v1_trace_is_still_read(tmp_path):
    v1 = {"v": 1, "machine": "single_agent", "sequence": 1, "step": 1, "source": "select", "trigger": "choose",
          "dest": "execute", "verdict": "selected", "guards": [{"name": "tool_selected", "value": True}],
          "duration_s": 0.001, "detail": {"tool": "a"}}
    path = tmp_path / "v1.jsonl"
    path.write_text(json.dumps(v1) + "\n")
    (record,) = read_trace(path)
    assert record.dest == "execute" and record.run_id == "" and record.at == 0.0 and record.detail == {"tool": "a"}


def test_a_time_that_is_not_iso_8601_names_the_field(tmp_path):
    line = two_step_run().trace[0].to_json() | {"at": "yesterday"}
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(line) + "\n")
    with pytest.raises(TraceFormatError, match="'at'"):
        read_trace(path)


def test_summary_never_raises_on_what_cannot_be_shown():
    class Hostile:
        def __repr__(self):
            raise RuntimeError("no")

    cyclic: list = []
    cyclic.append(cyclic)
    assert summary(Hostile(), 100) == "<Hostile that cannot be shown>"
    assert summary(cyclic, 100) == "[[...]]"
    assert len(summary("z" * (PAYLOAD_LIMIT * 3), PAYLOAD_LIMIT)) < PAYLOAD_LIMIT + 40
