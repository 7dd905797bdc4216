import textwrap
from pathlib import Path

import pytest

from forge import DefinitionError, load_definition
from forge.agent.stopping import StopReason
from forge.machine.loader import builtin_names, parse_definition

VALID = """
[machine]
name = "tiny"
initial = "select"

[states.select]
action = "select_tool"

[states.done]
terminal = true
outcome = "success"

[states.gap]
terminal = true
outcome = "needs_input"

[[transitions]]
source = "select"
trigger = "choose"
dest = "done"
guard = "tool_selected"

[[transitions]]
source = "select"
trigger = "choose"
dest = "gap"
guard = "no_tool_fits"
"""


def write(tmp_path, text, name="machine.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def problems_of(tmp_path, text):
    with pytest.raises(DefinitionError) as caught:
        load_definition(write(tmp_path, text))
    return caught.value


def test_builtin_single_agent_loads_by_name():
    definition = load_definition("single_agent")
    assert definition.initial == "select"
    assert [s.name for s in definition.states][:4] == ["select", "execute", "observe", "verify"]


def test_builtin_names_list_the_shipped_definitions():
    assert "single_agent" in builtin_names()


def test_every_stop_reason_and_selection_failure_is_a_terminal_state():
    terminal = {s.name: s.outcome for s in load_definition().terminal_states}
    stop_reasons = {r.value for r in StopReason} - {"continue"}
    assert stop_reasons | {"clarification_required", "capability_gap", "input_required", "budget_exhausted"} == set(
        terminal)
    assert terminal["verified_success"] == "success"
    assert terminal["clarification_required"] == "needs_input"


def test_user_file_loads_from_a_path(tmp_path):
    assert load_definition(write(tmp_path, VALID)).name == "tiny"


def test_unknown_name_lists_the_builtins():
    with pytest.raises(FileNotFoundError, match="single_agent"):
        load_definition("no_such_machine")


def test_error_names_the_file_and_the_entry(tmp_path):
    error = problems_of(tmp_path, VALID.replace('dest = "gap"', 'dest = "nowhere"'))
    assert str(tmp_path / "machine.toml") in str(error)
    assert "transitions[1] (select -choose-> nowhere [no_tool_fits])" in str(error)
    assert "unknown dest state 'nowhere'" in str(error)


def test_unknown_source_state_is_rejected(tmp_path):
    error = problems_of(tmp_path, VALID.replace('source = "select"\ntrigger = "choose"\ndest = "gap"',
                                                'source = "ghost"\ntrigger = "choose"\ndest = "gap"'))
    assert "unknown source state 'ghost'" in str(error)


def test_unknown_guard_is_rejected(tmp_path):
    error = problems_of(tmp_path, VALID.replace('"no_tool_fits"', '"maybe"'))
    assert "unknown guard 'maybe'" in str(error)


def test_guard_of_another_action_is_rejected(tmp_path):
    error = problems_of(tmp_path, VALID.replace('"no_tool_fits"', '"decided_continue"'))
    assert "tests the verdict of action 'verify_and_decide'" in str(error)


def test_unknown_action_is_rejected(tmp_path):
    error = problems_of(tmp_path, VALID.replace('"select_tool"', '"select_by_vibes"'))
    assert "states.select.action: unknown action 'select_by_vibes'" in str(error)


def test_missing_initial_state_is_rejected(tmp_path):
    error = problems_of(tmp_path, VALID.replace('initial = "select"\n', ""))
    assert "machine.initial: missing initial state" in str(error)


def test_initial_state_must_exist(tmp_path):
    error = problems_of(tmp_path, VALID.replace('initial = "select"', 'initial = "start"'))
    assert "machine.initial: unknown state 'start'" in str(error)


def test_terminal_state_with_outgoing_transition_is_rejected(tmp_path):
    text = VALID + '\n[[transitions]]\nsource = "done"\ntrigger = "again"\ndest = "select"\n'
    error = problems_of(tmp_path, text)
    assert "states.done: terminal state has outgoing transitions" in str(error)


def test_non_terminal_state_without_transitions_is_rejected(tmp_path):
    text = VALID + '\n[states.limbo]\naction = "call_tool"\n'
    error = problems_of(tmp_path, text)
    assert "states.limbo: non-terminal state has no outgoing transition" in str(error)


def test_terminal_state_needs_an_outcome(tmp_path):
    error = problems_of(tmp_path, VALID.replace('outcome = "success"', 'outcome = "great"'))
    assert "states.done.outcome: terminal state needs outcome" in str(error)


def test_invalid_toml_is_reported_with_the_file(tmp_path):
    error = problems_of(tmp_path, "[machine\nname=")
    assert "file: not valid TOML" in str(error)


def test_unknown_keys_are_rejected(tmp_path):
    error = problems_of(tmp_path, VALID.replace('[states.done]\n', '[states.done]\ncolour = "red"\n'))
    assert "states.done.colour: unknown key" in str(error)


def test_every_problem_is_reported_not_just_the_first(tmp_path):
    text = VALID.replace('"no_tool_fits"', '"maybe"').replace('initial = "select"', 'initial = "x"')
    assert len(problems_of(tmp_path, text).problems) == 2


def test_parse_collects_problems_without_raising(tmp_path):
    definition, problems = parse_definition(write(tmp_path, VALID.replace('"no_tool_fits"', '"maybe"')))
    assert definition is not None
    assert [p.entry for p in problems] == ['transitions[1] (select -choose-> gap [maybe])']


def test_a_definition_is_parsed_once_per_file_content(tmp_path):
    from forge.machine import loader

    path = tmp_path / "loop.toml"
    path.write_text(Path("machines/single_agent.toml").read_text())
    first = load_definition(path)
    misses = loader._parsed.cache_info().misses
    assert load_definition(path) is first
    assert loader._parsed.cache_info().misses == misses
    path.write_text(path.read_text().replace('title = "forge: single-agent tool loop"', 'title = "edited"'))
    edited = load_definition(path)
    assert edited.title == "edited" and loader._parsed.cache_info().misses == misses + 1


def test_a_definition_that_is_not_utf8_is_a_definition_error(tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes("[machine]\nname = \"caf\xe9\"\n".encode("latin-1"))
    with pytest.raises(DefinitionError, match="not UTF-8"):
        load_definition(path)


def test_the_fail_trigger_is_reserved(tmp_path):
    path = tmp_path / "fail.toml"
    path.write_text(Path("machines/single_agent.toml").read_text().replace('trigger = "call"', 'trigger = "fail"'))
    with pytest.raises(DefinitionError, match="trigger 'fail' is reserved"):
        load_definition(path)


def test_every_definition_needs_the_fatal_error_state(tmp_path):
    from forge.check import check_definition

    text = Path("machines/single_agent.toml").read_text()
    text = text.replace('dest = "fatal_error"', 'dest = "step_budget_exhausted"')
    head, _, tail = text.partition("[states.fatal_error]")
    tail = tail.split("\n\n", 1)[1]
    path = tmp_path / "nofatal.toml"
    path.write_text(head + tail)
    report = check_definition(path)
    assert "missing-stop-state" in {f.code for f in report.findings}
    assert any(f.entry == "states.fatal_error" for f in report.findings)
