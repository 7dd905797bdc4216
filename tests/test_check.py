import subprocess
import sys
from pathlib import Path

import pytest
from builders import Recorder, intent, scripted_loop, tool
from hypothesis import given, settings
from hypothesis import strategies as st

from forge import Limits, PermanentToolError, Retry, TransientToolError
from forge.check import Severity, check_definition
from forge.check.bounds import ABSTRACT_MODELS, explore
from forge.machine.loader import load_definition
from forge.machine.stages import ACTIONS

ROOT = Path(__file__).resolve().parents[1]
BROKEN = Path(__file__).parent / "definitions"


def codes(name):
    report = check_definition(BROKEN / f"{name}.toml")
    return report, {(f.severity, f.code) for f in report.findings}


@pytest.mark.parametrize("name, code", [
    ("unknown_state", "unknown-state"),
    ("unknown_action", "unknown-callback"),
    ("unknown_guard", "unknown-callback"),
    ("missing_initial", "missing-initial"),
    ("terminal_outgoing", "terminal-outgoing"),
    ("dead_end", "dead-end"),
    ("guard_mismatch", "guard-action-mismatch"),
    ("not_toml", "toml"),
    ("no_way_out", "no-way-out"),
    ("unhandled_verdict", "unhandled-verdict"),
    ("missing_stop_state", "missing-stop-state"),
    ("wrong_stop_state", "wrong-stop-state"),
    ("nondeterministic_same_guard", "nondeterministic"),
    ("nondeterministic_unguarded", "nondeterministic"),
    ("unbounded", "unbounded"),
    ("skips_verify", "unbounded"),
])
def test_broken_definition_is_an_error_with_its_code(name, code):
    report, found = codes(name)
    assert (Severity.ERROR, code) in found
    assert not report.ok


def test_unreachable_state_is_a_warning():
    report, found = codes("unreachable")
    assert (Severity.WARNING, "unreachable") in found
    assert report.ok


def test_findings_name_the_file_and_the_entry():
    report, _ = codes("unknown_state")
    finding = report.findings[0]
    assert finding.path.endswith("unknown_state.toml")
    assert finding.entry == "transitions[4] (execute -call-> observation)"
    assert "states are" in finding.message


def test_nondeterminism_names_both_transitions():
    report, _ = codes("nondeterministic_same_guard")
    finding = next(f for f in report.findings if f.code == "nondeterministic")
    assert "transitions[0]" in finding.entry and "transitions[2]" in finding.entry
    assert "both are guarded by 'tool_selected'" in finding.message


def test_unbounded_definition_prints_the_counterexample_path():
    report, _ = codes("unbounded")
    assert report.boundedness.bound is None
    entries = [t.entry for t in report.boundedness.counterexample]
    assert entries[-1] == "transitions[6] (execute -retry-> select [call_retryable])"
    assert any("counterexample" in line for line in report.lines())


def test_a_run_past_the_step_budget_is_a_counterexample():
    report, _ = codes("skips_verify")
    assert report.boundedness.over_budget
    assert "past max_steps=8 tool executions" in report.lines()[-2]


def test_shipped_definitions_pass():
    for path in sorted((ROOT / "machines").glob("*.toml")):
        report = check_definition(path)
        assert report.ok, report.lines()
        assert report.findings == ()


def test_shipped_loop_bound_is_four_transitions_per_step():
    for max_steps in (1, 3, 8):
        assert explore(load_definition(), max_steps, 3).bound == 4 * max_steps


def test_every_stage_action_has_an_abstract_model():
    assert set(ABSTRACT_MODELS) == set(ACTIONS)


outcomes = st.sampled_from(["ok", "transient", "permanent", "contract", "crash"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcd"), outcomes, st.booleans()), min_size=1, max_size=12),
       st.integers(1, 6), st.integers(1, 4))
def test_real_runs_never_take_more_transitions_than_the_bound(script, max_steps, repeat_limit):
    bound = explore(load_definition(), max_steps, repeat_limit).bound
    raised = {"transient": TransientToolError("503"), "permanent": PermanentToolError("no"), "crash": KeyError("x")}
    handlers = {name: Recorder(*[raised.get(kind, "value") for tool_name, kind, _ in script if tool_name == name])
                for name in "abcd"}
    tools = [tool(name, handler=handlers[name], required={"path"}) for name in "abcd"]
    intents = [intent(name, path="p", **({"sudo": True} if kind == "contract" else {})) for name, kind, _ in script]
    accept = iter([ok for _, _, ok in script])
    loop = scripted_loop(tools, intents, verify=lambda o: next(accept, False), max_steps=max_steps,
                         limits=Limits(repeat_limit=repeat_limit), retry=Retry(max_attempts=1))
    assert len(loop.run("goal").trace) <= bound


def test_cli_check_exits_non_zero_on_errors():
    out = subprocess.run([sys.executable, "-m", "forge", "check", str(BROKEN / "unbounded.toml")],
                         capture_output=True, text=True)
    assert out.returncode == 1
    assert "error[unbounded]" in out.stdout and "FAILED" in out.stdout


def test_cli_check_prints_the_bound_for_the_shipped_loop():
    out = subprocess.run([sys.executable, "-m", "forge", "check"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0
    assert "every run ends within 32 transitions (max_steps=8, repeat_limit=3" in out.stdout
