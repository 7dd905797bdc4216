import os
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest
from builders import intent, scripted_loop, tool

from forge import write_trace
from forge.scenario import ScenarioError, load_scenario

HELLO = str(Path(__file__).parents[1] / "examples" / "hello.py")
PROMPT = r"\(forge (\w+) step (\d+)\) "


@pytest.fixture
def debugger():
    env = dict(os.environ, NO_COLOR="1")
    child = pexpect.spawn(sys.executable, ["-m", "forge", "debug", HELLO], env=env, encoding="utf-8",
                          timeout=60, dimensions=(50, 220))
    child.expect(PROMPT)
    yield child
    child.close(force=True)


def command(child, line):
    child.sendline(line)
    child.expect(PROMPT)
    return child.before


def test_prompt_shows_the_state_and_step(debugger):
    assert debugger.match.groups() == ("select", "0")
    command(debugger, "step")
    assert debugger.match.groups() == ("execute", "1")


def test_where_at_execute_shows_the_arguments_about_to_be_sent(debugger):
    command(debugger, "step")
    assert 'call: greet {"name": "ada"}' in command(debugger, "where")


def test_where_after_an_observation_shows_its_payload(debugger):
    command(debugger, "step 3")
    assert "payload: hello ada" in command(debugger, "where")


def test_a_person_steps_breaks_continues_and_goes_back(debugger):
    assert "select ─choose→ execute" in command(debugger, "step")
    assert "breakpoint #1 state verify" in command(debugger, "break verify")
    assert "#1 state verify" in command(debugger, "breaks")
    screen = command(debugger, "continue")
    assert "stopped at breakpoint #1 state verify" in screen and debugger.match.group(1) == "verify"
    screen = command(debugger, "where")
    assert "at verify · step 1" in screen and "last: observe ─record→ verify" in screen
    assert '#1 greet {"name": "ada"}: ok · hello ada' in command(debugger, "obs")
    assert "now in observe" in command(debugger, "back")
    assert "ahead recorded" in command(debugger, "where")
    command(debugger, "delete all")
    screen = command(debugger, "continue")
    assert "run ended in verified_success" in screen
    assert "decided_verified_success" in command(debugger, "trace")


def test_where_lists_every_guard_with_its_value(debugger):
    command(debugger, "step")
    screen = command(debugger, "where")
    assert "tool_selected" in screen and "True" in screen
    assert "tool_choice_ambiguous" in screen and "False" in screen


def test_mistakes_print_one_line_and_the_session_goes_on(debugger):
    assert "error: unknown command 'jump'" in command(debugger, "jump")
    assert "error: expected a positive whole number, got 'two'" in command(debugger, "step two")
    assert "error: 'nowhere' is neither a state" in command(debugger, "break nowhere")
    assert "error: at the start of the run" in command(debugger, "back")
    assert "error: usage: diagram PATH" in command(debugger, "diagram")
    assert debugger.match.groups() == ("select", "0")


def test_stepping_past_the_end_is_a_clear_error(debugger):
    command(debugger, "step 50")
    assert "error: the run has ended in 'verified_success'" in command(debugger, "step")


def test_diagram_command_writes_the_path_so_far(debugger, tmp_path):
    command(debugger, "step 3")
    target = tmp_path / "now.dot"
    assert f"wrote {target}" in command(debugger, f"diagram {target}")
    assert "run is here" in target.read_text()


def test_help_lists_the_commands(debugger):
    screen = command(debugger, "help")
    for name in ["step", "continue", "break", "delete", "breaks", "where", "obs", "trace", "back", "diagram", "quit"]:
        assert name in screen


def test_ctrl_d_quits(debugger):
    debugger.sendeof()
    debugger.expect(pexpect.EOF)
    debugger.close()
    assert debugger.exitstatus == 0


def test_quit_quits(debugger):
    debugger.sendline("quit")
    debugger.expect(pexpect.EOF)
    debugger.close()
    assert debugger.exitstatus == 0 and debugger.signalstatus is None


def test_replay_without_a_tty_has_no_colour_codes(tmp_path):
    loop = scripted_loop([tool("a"), tool("b")], [intent("a"), intent("b")], verify=lambda o: o.tool_name == "b")
    trace = write_trace(loop.run("goal").trace, tmp_path / "run.jsonl")
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    commands = "break verify\ncontinue\nwhere\nback\nstep 10\nobs\n"
    out = subprocess.run([sys.executable, "-m", "forge", "replay", str(trace)], input=commands,
                         capture_output=True, text=True, env=env, timeout=30)
    assert out.returncode == 0
    assert "\x1b" not in out.stdout
    assert "replay of a recorded run (nothing executes)" in out.stdout
    assert "stopped at breakpoint #1 state verify" in out.stdout
    assert "#2 b: ok · done" in out.stdout  # the tool, its status and a summary of its payload


def test_replay_of_a_malformed_trace_is_one_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{}\n")
    out = subprocess.run([sys.executable, "-m", "forge", "replay", str(bad)], capture_output=True, text=True)
    assert out.returncode == 1 and "Traceback" not in out.stderr and f"{bad}:1:" in out.stderr


def test_demo_scenarios_load_by_name():
    scenario = load_scenario("gap")
    try:
        assert scenario.loop.run(scenario.goal).reason == "capability_gap"
    finally:
        scenario.close()


def test_demo_scenario_ships_as_a_module():
    scenario = load_scenario("forge.demo.scenario")
    try:
        assert scenario.loop.run(scenario.goal).reason == "verified_success"
    finally:
        scenario.close()


def test_a_module_without_loop_and_goal_is_refused(tmp_path):
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    with pytest.raises(ScenarioError, match="must define `loop`"):
        load_scenario(str(empty))


def test_an_unknown_scenario_names_the_options():
    with pytest.raises(ScenarioError, match="not a demo scenario"):
        load_scenario("no.such.module")


def test_repl_mistakes_go_to_stderr_and_the_session_goes_on():
    done = subprocess.run([sys.executable, "-m", "forge", "debug", "examples/hello.py"],
                          input="jump\nstep\nquit\n", capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert "error: unknown command 'jump'" in done.stderr and "error:" not in done.stdout
    assert "select ─choose→ execute" in done.stdout
