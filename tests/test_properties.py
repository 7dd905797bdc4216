"""Properties `forge check` proves over every path of a definition: approval before every
side effect, a deadline on every wait, every failure verdict handled; a violation prints its
counterexample and `--diagram` draws it in red; `[checks] require` makes a loop refuse to
start."""

from pathlib import Path

import pytest
from builders import forge

from forge import AgentLoop, Finish, Intent, Stage, tool
from forge.check import check_definition
from forge.check.properties import prove
from forge.machine.loader import load_definition
from forge.records.definition import DefinitionError

HERE = Path(__file__).parent
APPROVAL = Path(load_definition("approval").path).read_text()
SKIPS = APPROVAL.replace('trigger = "reject"\ndest = "observe"\nguard = "approval_rejected"',
                         'trigger = "reject"\ndest = "execute"\nguard = "approval_rejected"')


@tool(side_effect=True)
def publish(text: str) -> str:
    """Publish a text."""
    return text


@tool
def look(text: str) -> str:
    """Look at a text."""
    return text


def test_single_agent_fails_approval_before_side_effect_when_a_tool_has_one():
    (violation,) = prove(load_definition("single_agent"), "approval-before-side-effect")
    assert violation.entry == "states.execute"
    assert [(t.source, t.dest) for t in violation.path] == [("select", "execute")]


def test_single_agent_passes_it_when_no_tool_has_a_side_effect():
    assert prove(load_definition("single_agent"), "approval-before-side-effect", side_effects=False) == ()


def test_approval_passes_approval_before_side_effect():
    assert prove(load_definition("approval"), "approval-before-side-effect") == ()


def test_a_definition_that_skips_approval_on_one_path_fails_with_that_path(tmp_path):
    path = tmp_path / "skips.toml"
    path.write_text(SKIPS)
    (violation,) = prove(load_definition(path), "approval-before-side-effect")
    assert [(t.source, t.trigger, t.dest) for t in violation.path] == [
        ("select", "choose", "approve"), ("approve", "reject", "execute")]


def test_wait_has_timeout_names_every_waiting_state_without_a_deadline():
    found = {v.entry for v in prove(load_definition("approval"), "wait-has-timeout")}
    assert found == {"states.approval_required", "states.clarification_required", "states.capability_gap",
                     "states.input_required"}
    deadline = load_definition(HERE / "definitions" / "approval_deadline.toml")
    assert "states.approval_required" not in {v.entry for v in prove(deadline, "wait-has-timeout")}


def test_no_unhandled_error_holds_for_the_shipped_definitions():
    for name in ("single_agent", "approval"):
        assert prove(load_definition(name), "no-unhandled-error") == ()


def test_no_unhandled_error_fails_for_a_failure_verdict_left_to_a_catch_all(tmp_path):
    stages = {"audit": Stage(lambda run: "ok", {"ok", "broken"}, failures={"broken"})}
    path = tmp_path / "audited.toml"
    path.write_text('''
[machine]
name = "audited"
initial = "audit"

[states.audit]
action = "audit"

[states.fatal_error]
terminal = true
outcome = "failure"

[states.done]
terminal = true
outcome = "success"

[[transitions]]
source = "audit"
trigger = "next"
dest = "done"
''')
    report = check_definition(path, stages=stages, require=["no-unhandled-error"])
    (violation,) = report.violations
    assert violation.entry == "states.audit" and "'broken'" in violation.message
    assert not report.ok


def test_a_failure_verdict_a_stage_does_not_declare_is_refused():
    with pytest.raises(ValueError, match="not a declared verdict"):
        Stage(lambda run: "ok", {"ok"}, failures={"broken"})


def test_forge_check_require_prints_the_counterexample_and_fails():
    done = forge("check", "single_agent", "--require", "approval-before-side-effect")
    assert done.returncode == 1
    assert "approval-before-side-effect: states.execute" in done.stdout
    assert "1. select -choose-> execute [tool_selected]" in done.stdout


def test_forge_check_takes_the_side_effect_flags_from_the_loops_tools(tmp_path):
    (tmp_path / "readonly.py").write_text("from forge import tool\n\n@tool\ndef look(text: str) -> str:\n"
                                         "    '''Look.'''\n    return text\n\nTOOLS = [look]\n")
    done = forge("check", "single_agent", "--require", "approval-before-side-effect", "--tools", "readonly:TOOLS",
                 cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_forge_check_diagram_draws_the_counterexample_in_red(tmp_path):
    path = tmp_path / "skips.toml"
    path.write_text(SKIPS)
    out = tmp_path / "counterexample.svg"
    done = forge("check", str(path), "--require", "approval-before-side-effect", "--diagram", str(out))
    assert done.returncode == 1 and f"drawn in red: {out}" in done.stdout
    svg = out.read_text()
    assert "#c62828" in svg and "1. choose" in svg and "2. reject" in svg
    assert "the property fails here" in svg


def test_a_definition_requiring_a_property_it_fails_refuses_to_start(tmp_path):
    path = tmp_path / "strict.toml"
    path.write_text(Path(load_definition("single_agent").path).read_text()
                    + '\n[checks]\nrequire = ["approval-before-side-effect"]\n')
    with pytest.raises(DefinitionError, match="approval-before-side-effect.*counterexample: select -choose-> execute"):
        AgentLoop([publish], lambda goal, state: Finish("x"), lambda o: True, definition=path)
    loop = AgentLoop([look], lambda goal, state: Intent.call("look", text="x") if not state.observations
                     else Finish("x"), lambda o: o.tool_name == "finish", definition=path)
    assert loop.run("look").reason == "verified_success"  # no side effect: nothing to approve


def test_an_unknown_required_property_is_named(tmp_path):
    path = tmp_path / "typo.toml"
    path.write_text(APPROVAL + '\n[checks]\nrequire = ["approval-befor-side-effect"]\n')
    report = check_definition(path)
    assert not report.ok and "unknown property 'approval-befor-side-effect'" in "\n".join(report.lines())


def test_the_readmes_counterexample_picture_is_what_forge_check_draws_now(tmp_path):
    drawn = tmp_path / "counterexample.svg"
    forge("check", str(HERE.parent / "examples" / "skips_approval.toml"), "--require", "approval-before-side-effect",
          "--diagram", str(drawn))
    assert drawn.read_text() == (HERE.parent / "docs" / "counterexample.svg").read_text(), (
        "regenerate: forge check examples/skips_approval.toml --require approval-before-side-effect "
        "--diagram docs/counterexample.svg")


def test_forge_check_takes_a_tools_file_by_its_path_as_worker_loops_does(tmp_path):
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "shop.py").write_text("from forge import tool\n\n@tool\ndef look(text: str) -> str:\n"
                                                "    '''Look.'''\n    return text\n\nTOOLS = [look]\n")
    done = forge("check", "single_agent", "--require", "approval-before-side-effect", "--tools",
                 str(tmp_path / "agents" / "shop.py") + ":TOOLS")
    assert done.returncode == 0, done.stdout + done.stderr
