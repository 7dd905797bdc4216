import json

import pytest
from builders import intent, scripted_loop, tool

from forge import TraceFormatError, read_trace, write_trace
from forge.records.trace import TRACE_VERSION


def finished_trace():
    loop = scripted_loop([tool("a"), tool("b")], [intent("a"), intent("b")], verify=lambda o: o.tool_name == "b")
    return loop.run("goal").trace


def test_trace_round_trips_through_json_lines(tmp_path):
    trace = finished_trace()
    path = write_trace(trace, tmp_path / "run.jsonl")
    assert read_trace(path) == trace


def test_each_line_is_one_versioned_record(tmp_path):
    path = write_trace(finished_trace(), tmp_path / "run.jsonl")
    lines = path.read_text().splitlines()
    assert len(lines) == 8
    first = json.loads(lines[0])
    assert first["v"] == TRACE_VERSION
    assert first["machine"] == "single_agent"
    assert {"sequence", "step", "source", "trigger", "dest", "verdict", "guards", "duration_s", "detail"} <= set(first)


def test_non_json_line_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(finished_trace()[0].to_json()) + "\n{oops\n")
    with pytest.raises(TraceFormatError, match=r"bad.jsonl:2: "):
        read_trace(path)


def test_unknown_version_is_refused(tmp_path):
    record = finished_trace()[0].to_json() | {"v": 99}
    path = tmp_path / "v99.jsonl"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(TraceFormatError, match="unsupported trace version 99"):
        read_trace(path)


def test_missing_field_is_named(tmp_path):
    record = finished_trace()[0].to_json()
    del record["dest"]
    path = tmp_path / "nodest.jsonl"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(TraceFormatError, match="missing field 'dest'"):
        read_trace(path)


def test_out_of_order_sequence_is_refused(tmp_path):
    records = [r.to_json() for r in finished_trace()]
    path = tmp_path / "order.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [records[1], records[0]]))
    with pytest.raises(TraceFormatError, match="out of order"):
        read_trace(path)
