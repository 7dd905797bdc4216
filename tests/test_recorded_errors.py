"""Reading a journal, trace or cassette never imports or runs anything: a recorded error is
rebuilt from builtins, forge's own classes and the classes a loop's tools declare, and any
other keeps its kind (retried, reported) and its text."""

from __future__ import annotations

import json
import os
import sys

import pytest
from builders import forge

from forge import AgentLoop, Finish, Intent, PermanentToolError, Tool, ToolError, TransientToolError, write_trace
from forge.observe import LoopObserver
from forge.records.recorded import RecordedError, error_from
from forge.records.trace import read_journal


@pytest.fixture(autouse=True)
def _cold_caches():
    """Each test finds forge's error classes and makes recorded ones afresh: a warm cache left
    by an earlier test would hide a broken way of building it."""
    from forge.records import recorded

    recorded._LOADED.clear()
    recorded._RECORDED.clear()


EVIL = '''from pathlib import Path
Path({marker!r}).write_text("imported")

class Boom(Exception):
    pass
'''


def crafted_call(error_type: str, kind: str | None = None) -> dict:
    error = {"type": error_type, "message": "boom", "args": ["boom"], "attributes": {}}
    if kind is not None:
        error["kind"] = kind
    return {"v": 3, "type": "call", "run_id": "r", "transition": 1, "step": 1, "kind": "tool", "name": "t",
            "args_sha256": "0" * 64, "error": error}


def test_reading_a_journal_never_imports_the_module_a_recorded_error_names(tmp_path, monkeypatch):
    marker = tmp_path / "imported"
    (tmp_path / "evil_forge_probe.py").write_text(EVIL.format(marker=str(marker)))
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "crafted.jsonl"
    path.write_text(json.dumps(crafted_call("evil_forge_probe:Boom")) + "\n")
    error = read_journal(path)[0].error
    assert not marker.exists()
    assert "evil_forge_probe" not in sys.modules
    assert isinstance(error, RecordedError) and type(error).__name__ == "Boom" and str(error) == "boom"


def test_forge_diff_of_a_crafted_file_imports_nothing(tmp_path):
    marker = tmp_path / "imported"
    (tmp_path / "evil_forge_probe.py").write_text(EVIL.format(marker=str(marker)))
    record = {"v": 2, "run_id": "r", "at": "2026-01-01T00:00:00+00:00", "sequence": 1, "step": 0,
              "source": "select_tool", "trigger": "select", "dest": "execute_tool", "verdict": "selected",
              "guards": {}, "duration_s": 0.0, "detail": {}, "machine": "single_agent"}
    for name in ("a.jsonl", "b.jsonl"):
        (tmp_path / name).write_text(json.dumps(crafted_call("evil_forge_probe:Boom")) + "\n" + json.dumps(record) + "\n")
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(tmp_path)
    try:
        forge("diff", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), cwd=tmp_path)
    finally:
        os.environ.pop("PYTHONPATH") if old is None else os.environ.__setitem__("PYTHONPATH", old)
    assert not marker.exists()


@pytest.mark.parametrize(("kind", "base"), [("transient", TransientToolError), ("tool_error", ToolError)])
def test_an_unknown_error_class_keeps_its_recorded_kind(kind, base):
    error = error_from(crafted_call("somewhere:Odd", kind)["error"])
    assert isinstance(error, base) and isinstance(error, RecordedError)


def test_builtin_and_forge_errors_are_rebuilt_as_their_own_class():
    assert type(error_from({"type": "builtins:KeyError", "args": ["k"]})) is KeyError
    rebuilt = error_from({"type": "forge.agent.retry:TransientToolError", "kind": "transient", "args": ["x"],
                          "attributes": {"retry_after": 2.0}})
    assert type(rebuilt) is TransientToolError and rebuilt.retry_after == 2.0


def test_a_recorded_kind_that_is_not_known_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"'error.kind' must be one of .*'sometimes'"):
        error_from({"type": "x:Y", "kind": "sometimes"})


FETCHES = {"n": 0}
"""Every call of a flaky loop's fetch, as it is made: a replay makes none."""


def flaky_loop(error_class: type[BaseException], *, declared: bool = False) -> AgentLoop:
    calls = FETCHES
    calls["n"] = 0

    def fetch() -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            raise error_class("try again")
        return "page"

    return AgentLoop([Tool("fetch", {"fetch"}, fetch, raises=[error_class] if declared else [])],
                     lambda goal, state: Finish("done") if state.observations else Intent.call("fetch"),
                     lambda o: o.tool_name == "finish")


def test_a_transient_error_class_made_inside_a_function_replays_from_a_file_as_retried(tmp_path):
    class LocalBusy(TransientToolError):
        pass

    loop = flaky_loop(LocalBusy)
    result = loop.run("fetch it")
    assert result.reason == "verified_success"
    path = write_trace(result.trace, tmp_path / "run.jsonl", journal=result.journal)
    fetched = FETCHES["n"]
    again = loop.replay(path)
    assert again.reason == "verified_success" and again.trace == result.trace
    assert fetched == 2 and FETCHES["n"] == fetched  # the replay called nothing


class Busy(TransientToolError):
    """Declared by the tool: a replay rebuilds it as this class."""


class Attempts(LoopObserver):
    def __init__(self) -> None:
        self.errors: list[BaseException] = []

    def tool_attempt(self, run, attempt) -> None:
        if attempt.error is not None:
            self.errors.append(attempt.error)


def test_a_replay_rebuilds_an_error_class_its_tool_declares(tmp_path):
    loop = flaky_loop(Busy, declared=True)
    result = loop.run("fetch it")
    path = write_trace(result.trace, tmp_path / "run.jsonl", journal=result.journal)
    assert not any(type(entry.error) is Busy for entry in read_journal(path))  # the file alone: not rebuilt
    seen, fetched = Attempts(), FETCHES["n"]
    assert loop.replay(path, observers=[seen]).reason == "verified_success"
    assert FETCHES["n"] == fetched  # the replay called nothing
    assert [type(error) for error in seen.errors] == [Busy]


def test_a_recorded_class_is_made_once_per_name_and_kind():
    first = error_from({"type": "somewhere:Odd", "kind": "tool_error", "message": "a"})
    second = error_from({"type": "somewhere:Odd", "kind": "tool_error", "message": "b"})
    other = error_from({"type": "somewhere:Odd", "kind": "transient", "message": "c"})
    assert type(first) is type(second) and type(other) is not type(first)
    assert (type(first).__name__, type(first).__qualname__, type(first).__module__) == ("Odd", "Odd", "somewhere")
    assert (str(first), str(second)) == ("a", "b")


def test_a_recorded_error_pickles_as_what_it_records():
    import pickle

    error = error_from({"type": "somewhere:Odd", "kind": "permanent", "message": "denied", "args": ["denied"]})
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error) and str(again) == "denied" and isinstance(again, PermanentToolError)


@pytest.mark.parametrize(("error", "kind"), [(TransientToolError("x"), "transient"), (PermanentToolError("x"), "permanent"),
                                             (ToolError("x"), "tool_error"), (KeyError("x"), "error")])
def test_each_error_is_written_with_its_kind_and_read_back_as_it(error, kind):
    from forge.records.recorded import error_json

    written = error_json(error, lambda value: isinstance(value, (str, int, float, type(None))))
    assert written["kind"] == kind and written["type"].endswith(type(error).__qualname__)
    read = error_from(written)
    assert type(read) is type(error) and read.args == error.args


def _written_again(data: dict) -> dict:
    from forge.records.wire import error_form as _error_json

    return _error_json(error_from(data))


def test_an_error_read_from_a_file_is_written_again_exactly_as_it_was_read():
    recorded = {"type": "billing.api:Client.QuotaExceeded", "kind": "transient", "message": "quota used up",
                "args": ["quota used up", 3], "attributes": {"status_code": 429}}
    again = _written_again(recorded)
    assert again == recorded
    assert _written_again(again) == recorded
    error = error_from(recorded)
    assert type(error).__qualname__ == "Client.QuotaExceeded" and type(error).__name__ == "QuotaExceeded"
    assert type(error).__module__ == "billing.api" and error.status_code == 429


def test_a_recorded_class_without_a_module_or_name_reads_as_a_recorded_error():
    error = error_from({"type": ":", "kind": "error", "message": "m", "args": ["m"], "attributes": {}})
    assert type(error).__name__ == type(error).__qualname__ == "RecordedError"
    assert type(error).__module__ == "forge.records.recorded"
    assert _written_again({"type": ":", "kind": "error", "message": "m", "args": ["m"], "attributes": {}})["type"] == ":"


def test_a_rebuilt_transient_error_has_no_retry_hint_unless_one_was_recorded():
    error = error_from({"type": "svc:Busy", "kind": "transient", "message": "busy", "args": [], "attributes": {}})
    assert isinstance(error, TransientToolError) and error.retry_after is None
    hinted = error_from({"type": "svc:Busy", "kind": "transient", "message": "busy", "args": [],
                         "attributes": {"retry_after": 2.5}})
    assert hinted.retry_after == 2.5


def test_only_public_recorded_attributes_are_set_on_a_rebuilt_error():
    error = error_from({"type": "svc:Odd", "message": "m", "args": [],
                        "attributes": {"_secret": 1, "code": 7, "__class__": "str"}})
    assert error.code == 7 and not hasattr(error, "_secret") and isinstance(error, RecordedError)


def test_a_recorded_attribute_a_builtin_error_cannot_take_is_skipped():
    os_error = error_from({"type": "builtins:BlockingIOError", "message": "m", "args": [11, "m"],
                           "attributes": {"characters_written": "not a number"}})
    assert isinstance(os_error, BlockingIOError)


def test_a_builtin_name_that_is_not_an_error_class_reads_as_a_recorded_error():
    for name in ("builtins:print", "builtins:int", "builtins:NoSuchThing"):
        error = error_from({"type": name, "message": "m", "args": ["m"], "attributes": {}})
        assert isinstance(error, RecordedError), name
        assert _written_again({"type": name, "kind": "error", "message": "m", "args": ["m"], "attributes": {}})["type"] == name


def test_a_loaded_class_outside_forge_reads_as_a_recorded_error_and_runs_none_of_its_code():
    import json as loaded  # json.decoder:JSONDecodeError is loaded, and its __init__ needs three arguments

    assert loaded.decoder.JSONDecodeError
    error = error_from({"type": "json.decoder:JSONDecodeError", "message": "bad", "args": ["bad"], "attributes": {}})
    assert isinstance(error, RecordedError) and type(error).__name__ == "JSONDecodeError"


def test_a_forge_class_defined_inside_a_function_is_not_taken_for_a_recorded_name():
    def make() -> type:
        class Local(ToolError):
            pass
        return Local

    local = make()
    error = error_from({"type": f"{local.__module__}:{local.__qualname__}", "kind": "tool_error",
                        "message": "m", "args": ["m"], "attributes": {}})
    assert type(error) is not local and isinstance(error, RecordedError) and isinstance(error, ToolError)


def test_error_attributes_and_arguments_json_cannot_hold_are_written_as_text_or_left_out():
    error = RuntimeError("failed", object())
    error.code = 7
    error.handle = object()
    error._private = 1
    from forge.records.wire import error_form as _error_json

    line = _error_json(error)
    assert line["attributes"] == {"code": 7}
    assert line["args"][0] == "failed" and line["args"][1].startswith("<object object at")
    assert line["message"] == str(error)


def test_an_error_line_without_a_type_is_refused_naming_what_is_missing():
    for data in ({}, {"message": "m"}, {"type": 3}, "boom", None):
        with pytest.raises(ValueError, match="'error' must be an object with a 'type'"):
            error_from(data)
    with pytest.raises(ValueError, match="'error.kind' must be one of transient, permanent, tool_error, error"):
        error_from({"type": "x:Y", "kind": "fatal"})


def test_a_recorded_error_without_a_message_reads_as_its_arguments():
    error = error_from({"type": "svc:Odd", "args": ["from args"], "attributes": {}})
    assert str(error) == "from args"
