"""User stages: supplied with AgentLoop(..., stages=...), loaded, checked and run exactly like
the built-in ones."""

import subprocess
import sys
from pathlib import Path

import pytest
from builders import intent, scripted_loop, tool
from user_stages import STAGES, budget

from forge import AgentLoop, DefinitionError, ScriptedPolicy, Stage, load_definition
from forge.check import check_definition

BUDGETED = Path(__file__).parent / "definitions" / "budgeted.toml"


def test_a_user_stage_runs_between_built_in_ones_and_stops_in_its_terminal_state():
    loop = scripted_loop([tool("a"), tool("b")], [intent("a"), intent("b"), intent("a"), intent("b")],
                         definition=BUDGETED, stages=STAGES)
    result = loop.run("goal")
    assert (result.reason, result.outcome, result.steps) == ("budget_exceeded", "failure", 3)
    budget_records = [r for r in result.trace if r.source == "budget"]
    assert [r.detail["spent"] for r in budget_records] == [1, 2, 3]
    assert [r.dest for r in budget_records] == ["verify", "verify", "budget_exceeded"]


def test_within_budget_the_run_verifies_as_usual():
    loop = scripted_loop([tool("a")], [intent("a")], verify=lambda o: True, definition=BUDGETED, stages=STAGES)
    assert loop.run("goal").reason == "verified_success"


def test_a_definition_naming_an_unknown_stage_is_refused_with_a_hint():
    with pytest.raises(DefinitionError, match="unknown action 'check_budget'.*stages="):
        load_definition(BUDGETED)


def test_forge_check_proves_a_definition_with_user_stages_bounded():
    report = check_definition(BUDGETED, stages=STAGES)
    assert report.ok and report.boundedness is not None and report.boundedness.bound == 40


def test_forge_check_finds_a_cycle_through_user_stages_alone(tmp_path):
    text = BUDGETED.read_text().replace('source = "budget"\ntrigger = "checked"\ndest = "verify"',
                                        'source = "budget"\ntrigger = "checked"\ndest = "budget"')
    looping = tmp_path / "looping.toml"
    looping.write_text(text)
    report = check_definition(looping, stages=STAGES)
    assert not report.ok
    assert "unbounded" in {f.code for f in report.findings}


def test_forge_check_cli_takes_stages_by_module_and_name():
    tests = Path(__file__).parent
    run = subprocess.run([sys.executable, "-m", "forge.cli", "check", str(BUDGETED), "--stages", "user_stages:STAGES"],
                         cwd=tests, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "ok" in run.stdout.splitlines()[-1]
    bad = subprocess.run([sys.executable, "-m", "forge.cli", "check", str(BUDGETED), "--stages", "no_such_module:X"],
                         cwd=tests, capture_output=True, text=True)
    assert bad.returncode != 0 and "cannot import 'no_such_module'" in bad.stderr + bad.stdout
    assert "Traceback" not in bad.stderr


def test_a_loop_refuses_user_stages_that_make_its_definition_unsound(tmp_path):
    with pytest.raises(DefinitionError, match="unhandled-verdict|can return"):
        scripted_loop([tool("a")], [intent("a")], definition=BUDGETED,
                      stages={"check_budget": Stage(lambda run: "within", {"within", "over", "unsure"},
                                                    guards={"within_budget": "within", "over_budget": "over"},
                                                    stops_in={"over_budget": "budget_exceeded"})})


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Stage(lambda run: "x", set()), "at least one verdict"),
    (lambda: Stage(lambda run: "x", "x"), "not a string"),
    (lambda: Stage("not callable", {"x"}), "must be callable"),
    (lambda: Stage(lambda run: "x", {"x"}, guards={"g": "y"}), "'y', which is not a declared verdict"),
    (lambda: Stage(lambda run: "x", {"x"}, guards={"bad name": "x"}), "not an identifier"),
    (lambda: Stage(lambda run: "x", {"x"}, stops_in={"nope": "end"}), "not one of the stage's guards"),
])
def test_a_malformed_stage_is_refused_naming_the_problem(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize(("stages", "message"), [
    ({"select_tool": budget(1)}, "clashes with the action"),
    ({"mine": Stage(lambda run: "ok", {"ok"}, guards={"tool_selected": "ok"})}, "clashes with the guard"),
    ({"mine": "not a stage"}, "must be a forge Stage"),
])
def test_user_stages_that_clash_with_built_ins_are_refused(stages, message):
    with pytest.raises(ValueError, match=message):
        AgentLoop([tool("a")], ScriptedPolicy([]), lambda o: True, stages=stages)


def test_loops_with_equal_stages_share_one_parsed_definition_and_engine():
    first = scripted_loop([tool("a")], [intent("a")], definition=BUDGETED, stages=STAGES)
    second = scripted_loop([tool("b")], [intent("b")], definition=BUDGETED, stages=dict(STAGES))
    assert first.definition is second.definition
    assert first.engine is second.engine


def test_a_stage_that_still_assigns_run_detail_works_with_a_deprecation_warning():
    def check(run):
        run.detail = {"spent": run.loop_state.step_count}
        return "within"

    old_style = {"check_budget": Stage(check, {"within", "over"}, guards={"within_budget": "within", "over_budget": "over"},
                                       stops_in={"over_budget": "budget_exceeded"})}
    loop = scripted_loop([tool("a")], [intent("a")], verify=lambda o: True, definition=BUDGETED, stages=old_style)
    with pytest.warns(DeprecationWarning, match="return StageOutcome"):
        result = loop.run("goal")
    assert result.reason == "verified_success"
    assert [r.detail for r in result.trace if r.source == "budget"][:1] == [{"spent": 1}]


def test_a_stage_reads_the_run_but_cannot_write_what_the_stages_decided():
    def meddle(run):
        run.intent = None  # what select_tool decided is the engine's to change
        return "within"

    stages = {"check_budget": Stage(meddle, {"within", "over"}, guards={"within_budget": "within", "over_budget": "over"},
                                    stops_in={"over_budget": "budget_exceeded"})}
    result = scripted_loop([tool("a")], [intent("a")], verify=lambda o: True, definition=BUDGETED, stages=stages).run("g")
    assert result.reason == "fatal_error" and isinstance(result.error, AttributeError)
    assert result.trace[-1].detail["failed"] == "action check_budget"
