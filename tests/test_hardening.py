"""Issue 15's reproductions, one test each: bad input gets a clear error, forge check proves
what runs, nothing races or deadlocks."""

import subprocess
import sys
from pathlib import Path

import pytest

from forge import DefinitionError, load_definition
from forge.check import check_definition
from forge.cli import main as forge_main

SHIPPED = Path("machines/single_agent.toml").read_text()


def _definition(tmp_path, text, name="loop.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


# 1. a list or table where a string belongs


@pytest.mark.parametrize(("old", "new", "entry"), [
    ('action = "call_tool"', 'action = ["call_tool"]', "states.execute.action: must be a string, not an array"),
    ('outcome = "success"', 'outcome = { kind = "success" }', "states.verified_success.outcome: must be a string, not a table"),
])
def test_a_list_or_table_where_a_string_belongs_is_a_definition_error(tmp_path, capsys, old, new, entry):
    path = _definition(tmp_path, SHIPPED.replace(old, new, 1))
    with pytest.raises(DefinitionError, match=entry):
        load_definition(path)
    assert forge_main(["check", str(path)]) == 1
    out = capsys.readouterr()
    assert entry in out.out and "Traceback" not in out.err


# 2. not UTF-8, or nested thousands deep


def test_a_definition_nested_five_thousand_deep_is_a_definition_error(tmp_path):
    path = _definition(tmp_path, "a = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(DefinitionError, match="nested too deeply"):
        load_definition(path)


# 3. forge check models what each stage needs, and that success passes a verify that said yes


@pytest.mark.parametrize(("initial", "code"), [
    ("execute", "stage-order"), ("observe", "stage-order"), ("verify", "stage-order"),
    ("verified_success", "terminal-initial"),
])
def test_a_definition_starting_where_no_stage_can_work_is_refused(tmp_path, initial, code):
    path = _definition(tmp_path, SHIPPED.replace('initial = "select"', f'initial = "{initial}"'))
    report = check_definition(path)
    assert not report.ok and code in {f.code for f in report.findings}


def test_routing_a_continue_into_success_is_refused(tmp_path):
    text = SHIPPED.replace('dest = "select"\nguard = "decided_continue"', 'dest = "verified_success"\nguard = "decided_continue"')
    report = check_definition(_definition(tmp_path, text))
    (finding,) = [f for f in report.findings if f.code == "unverified-success"]
    assert "decided_continue" in finding.message and "decided_verified_success" in finding.message


def test_a_loop_refuses_what_forge_check_refuses_instead_of_crashing_at_run_time(tmp_path):
    from builders import intent, scripted_loop, tool

    path = _definition(tmp_path, SHIPPED.replace('initial = "select"', 'initial = "execute"'))
    with pytest.raises(DefinitionError, match="call_tool needs a tool selected"):
        scripted_loop([tool("a")], [intent("a")], definition=path)


# 4. names are whole identifiers


def test_a_state_name_with_a_trailing_newline_is_refused(tmp_path):
    text = SHIPPED.replace("[states.observe]", '[states."observe\\n"]')
    with pytest.raises(DefinitionError, match="state name is not an identifier"):
        load_definition(_definition(tmp_path, text))


# 5. forge check scales


def test_forge_check_runs_three_thousand_steps_without_recursion_or_a_limit_change():
    before = sys.getrecursionlimit()
    report = check_definition("single_agent", max_steps=3000, repeat_limit=3)
    assert report.ok and report.boundedness.bound == 4 * 3000
    assert sys.getrecursionlimit() == before


def test_forge_check_finishes_a_thousand_state_definition(tmp_path):
    sys.path.insert(0, str(Path("benchmarks").resolve()))
    try:
        from check_scaling import generated
    finally:
        sys.path.pop(0)
    report = check_definition(generated(1000, tmp_path))
    assert report.ok and report.boundedness.bound == 8 * (3 + 991)


def test_forge_check_bounds_large_limits_and_reports_progress_as_it_goes():
    from forge.check.bounds import explore

    assert check_definition("single_agent", max_steps=200, repeat_limit=10).boundedness.bound == 800
    seen: list[int] = []
    explore(load_definition(), 200, 10, progress=seen.append, every=0.0)
    assert seen and seen == sorted(seen) and seen[-1] > 10_000


# 6. forge diagrams with no definitions is an error, not "up to date"


def test_forge_diagrams_check_on_a_missing_folder_fails(tmp_path, capsys):
    assert forge_main(["diagrams", "--check", "--machines", str(tmp_path / "missing_dir")]) == 1
    assert "no definitions folder" in capsys.readouterr().err


def test_forge_diagrams_outside_a_project_writes_nothing(tmp_path):
    done = subprocess.run([sys.executable, "-m", "forge.cli", "diagrams"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 1 and "no definitions folder 'machines'" in done.stderr
    assert not (tmp_path / "diagrams").exists()


# 7. replay tolerates a record whose detail lacks a field


def test_replay_shows_a_record_whose_detail_lacks_fields(tmp_path):
    from forge import GuardResult, TransitionRecord, write_trace

    records = [TransitionRecord(1, 1, "select", "choose", "execute", (GuardResult("tool_selected", True),),
                                detail={"tool": "a"}),
               TransitionRecord(2, 1, "execute", "call", "observe", detail={"tool": "a"}),
               TransitionRecord(3, 1, "observe", "record", "verify", detail={}),
               TransitionRecord(4, 1, "verify", "stop", "fatal_error", (GuardResult("decided_fatal_error", True),),
                                detail={"decision": "fatal_error"})]
    path = write_trace(records, tmp_path / "run.jsonl")
    done = subprocess.run([sys.executable, "-m", "forge.cli", "replay", str(path)], input="continue\nobs\nquit\n",
                          capture_output=True, text=True)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "verified=? → fatal_error" in done.stdout


# 8. read_trace refuses junk cleanly and quotes little


def test_read_trace_refuses_binary_junk_deep_nesting_and_never_echoes_a_huge_field(tmp_path):
    from forge import TraceFormatError, read_trace

    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b"\xff\xfe\x00garbage\n")
    with pytest.raises(TraceFormatError, match="junk.jsonl:1: not UTF-8"):
        read_trace(junk)
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(TraceFormatError, match="nested too deeply"):
        read_trace(deep)
    huge = tmp_path / "huge.jsonl"
    huge.write_text('{"v": "' + "x" * 10_000_000 + '"}\n')
    with pytest.raises(TraceFormatError) as raised:
        read_trace(huge)
    assert len(str(raised.value)) < 1000 and "more characters" in str(raised.value)


# 9. a tool failing with a huge message does not write a huge trace line


def test_error_text_in_traces_is_capped(tmp_path):
    from builders import Recorder, intent, scripted_loop, tool
    from forge import write_trace

    message = "y" * 50_000_000
    result = scripted_loop([tool("a", handler=Recorder(RuntimeError(message)))], [intent("a")]).run("goal")
    path = write_trace(result.trace, tmp_path / "run.jsonl")
    assert max(len(line) for line in path.read_text().splitlines()) < 5_000
    assert str(result.error) == message  # the exception itself is whole


# 10. verify returning a non-bool is an error: tests/test_agents.py


# 11. every number is validated, naming the parameter


@pytest.mark.parametrize(("option", "value"), [
    ("max_steps", float("nan")), ("max_steps", float("inf")), ("max_steps", 2.5), ("max_steps", "4"),
    ("max_steps", None), ("max_steps", True), ("repeat_limit", 0), ("max_attempts", 2.5),
    ("base_delay", -1), ("max_delay", float("nan")), ("deadline", 0), ("deadline", float("inf")),
])
def test_a_bad_number_is_refused_naming_the_parameter(option, value):
    from builders import intent, scripted_loop, tool

    with pytest.raises(ValueError, match=option if option not in ("base_delay", "max_delay") else "delays"):
        scripted_loop([tool("a")], [intent("a")], **{option: value})


# 12. odd capabilities, argument names and messages are contract errors, not crashes


def test_an_intent_with_a_non_string_capability_or_argument_name_is_a_clear_error():
    from forge import Intent

    with pytest.raises(ValueError, match="capabilities must be strings; 1 is a int"):
        Intent({1})
    with pytest.raises(ValueError, match="keys must be strings; 1 is a int"):
        Intent({"a"}, {1: "x"})


def test_a_policy_making_a_bad_intent_ends_the_run_recorded_not_with_an_escaping_error():
    from forge import AgentLoop, Intent
    from builders import tool

    result = AgentLoop([tool("a")], lambda goal, state: Intent({1}), verify=lambda o: True).run("goal")
    assert result.reason == "fatal_error" and "capabilities must be strings" in str(result.error)


def test_an_argument_named_by_a_number_is_a_contract_error():
    from forge import ArgumentContractError
    from forge.agent.execution import ToolContract, execute_tool

    with pytest.raises(ArgumentContractError, match="unexpected: 1"):
        execute_tool(ToolContract("t", frozenset({"a"}), lambda **k: k), {"a": 1, 1: 2})


def test_an_exception_whose_str_raises_is_still_recorded():
    from builders import intent, scripted_loop, tool

    class Unprintable(Exception):
        def __str__(self):
            raise RuntimeError("no")

    def handler():
        raise Unprintable()

    result = scripted_loop([tool("a", handler=handler)], [intent("a")]).run("goal")
    assert result.reason == "fatal_error" and isinstance(result.error, Unprintable)
    assert "Unprintable (its message could not be made" in result.trace[1].detail["error"]


# 13. a side-effecting call must have a canonical form


def test_side_effecting_arguments_without_a_canonical_form_are_refused_not_run_twice():
    from forge import AgentLoop, Intent, ScriptedPolicy, Tool
    from builders import Recorder

    class Thing:
        pass

    handler = Recorder("sent")
    send = Tool("send", {"send"}, handler, required={"what"}, side_effect=True)
    thing = Thing()
    result = AgentLoop([send], ScriptedPolicy([Intent.call("send", what=thing), Intent.call("send", what="plain")]),
                       verify=lambda o: o.status == "ok").run("goal")
    first = result.state.observations[0]
    assert first.status == "retryable_error" and "what: has no canonical form (a Thing)" in str(first.payload)
    assert handler.calls == [{"what": "plain"}]
