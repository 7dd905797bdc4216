"""Issue 15's reproductions, one test each: bad input gets a clear error, forge check proves
what runs, nothing races or deadlocks."""

import subprocess
import sys
from pathlib import Path

import pytest

from forge import DefinitionError, Limits, load_definition
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

    from forge.options import FLAT_NAMES, GROUPS

    with pytest.raises(ValueError, match=option if option not in ("base_delay", "max_delay") else "delays"):
        group = FLAT_NAMES.get(option)
        scripted_loop([tool("a")], [intent("a")], **({option: value} if group is None
                                                     else {group: GROUPS[group](**{option: value})}))


# 12. odd capabilities, argument names and messages are contract errors, not crashes


def test_an_intent_with_a_non_string_capability_or_argument_name_is_a_clear_error():
    from forge import Intent

    with pytest.raises(ValueError, match="capabilities must be strings; 1 is a int"):
        Intent({1})
    with pytest.raises(ValueError, match="keys must be strings; 1 is a int"):
        Intent({"a"}, {1: "x"})


def test_a_policy_making_a_bad_intent_ends_the_run_recorded_not_with_an_escaping_error():
    from builders import tool

    from forge import AgentLoop, Intent

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
    from builders import Recorder

    from forge import AgentLoop, Intent, ScriptedPolicy, Tool

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


# 14. re-entering a side effect's own key is refused, not a deadlock


def test_a_side_effect_that_reenters_its_loop_with_a_shared_registry_is_refused():
    import threading

    from forge import AgentLoop, IdempotencyRegistry, Intent, ScriptedPolicy, Tool

    registry = IdempotencyRegistry()
    inner_results = []

    def send(to):
        inner = AgentLoop([send_tool], ScriptedPolicy([Intent.call("send", to=to)]), verify=lambda o: True,
                          registry=registry)
        inner_results.append(inner.run("send again"))
        return "sent"

    send_tool = Tool("send", {"send"}, send, required={"to"}, side_effect=True)
    outer = AgentLoop([send_tool], ScriptedPolicy([Intent.call("send", to="a")]), verify=lambda o: True,
                      registry=registry)
    finished = []
    worker = threading.Thread(target=lambda: finished.append(outer.run("send")), daemon=True)
    worker.start()
    worker.join(10)
    assert finished, "the re-entered loop deadlocked"
    (inner,) = inner_results
    assert inner.reason == "fatal_error" and "used again from inside its own operation" in str(inner.error)


# 15. a failing key leaves nothing behind


def test_the_registry_forgets_keys_whose_operation_failed():
    from forge import IdempotencyRegistry

    registry = IdempotencyRegistry()

    def fail():
        raise RuntimeError("no")

    for n in range(1000):
        with pytest.raises(RuntimeError):
            registry.execute_once(f"key{n}", "fp", fail)
    assert registry._slots == {} and len(registry) == 0
    assert registry.execute_once("kept", "fp", lambda: 1) == (1, False) and "kept" in registry


# 16. messages that help


def test_tool_given_a_function_where_capabilities_belong_says_so():
    from forge import Tool

    def add(a: int, b: int) -> int:
        return a + b

    with pytest.raises(ValueError, match=r"Tool\('add', add\): the second argument is the capabilities.*from_function"):
        Tool("add", add)


def test_the_summary_names_tied_tools_and_a_misspelled_argument():
    from builders import Recorder, intent, scripted_loop, tool

    from forge import AgentLoop, Intent, ScriptedPolicy, Tool

    tie = scripted_loop([tool("x", {"read"}), tool("y", {"read"})], [intent("read")]).run("goal")
    assert "x, y tie for the intent's capabilities" in tie.summary
    reader = Tool("read", {"read"}, Recorder(), required={"path"})
    typo = AgentLoop([reader], ScriptedPolicy([Intent.call("read", pth="a.md")] * 2), verify=lambda o: True,
                     max_steps=2, limits=Limits(repeat_limit=5)).run("goal")
    assert typo.reason == "step_budget_exhausted" and typo.error is None
    assert "the last call, read, failed" in typo.summary and "missing: path; unexpected: pth" in typo.summary


# 19. a scenario that cannot load is one line, not a traceback


@pytest.mark.parametrize("spec", [".x", "tests/scenarios/raises.py", "scenarios.raises_on_import"])
def test_forge_debug_on_a_scenario_that_cannot_load_says_why_in_one_line(tmp_path, spec):
    scenarios = tmp_path / "tests" / "scenarios"  # in the test's own folder: never written into the checkout
    scenarios.mkdir(parents=True)
    (scenarios / "raises.py").write_text("raise RuntimeError('broken on purpose')\n")
    (scenarios / "raises_on_import.py").write_text("raise RuntimeError('broken on purpose')\n")
    done = subprocess.run([sys.executable, "-m", "forge.cli", "debug", spec], cwd=tmp_path, input="quit\n",
                          capture_output=True, text=True,
                          env={**__import__("os").environ, "PYTHONPATH": str(tmp_path / "tests")})
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("forge: error: ") and len(done.stderr.strip().splitlines()) == 1


# 20. versions


def test_forge_says_its_version():
    import forge

    done = subprocess.run([sys.executable, "-m", "forge.cli", "--version"], capture_output=True, text=True)
    assert done.stdout.strip() == f"forge {forge.__version__}" and forge.__version__[0].isdigit()


# 21. forge run, and exit codes that say how the run ended


@pytest.mark.parametrize(("scenario", "code"), [("examples/hello.py", 0), ("gap", 3), ("forbidden", 1)])
def test_forge_run_runs_a_scenario_and_exits_by_its_outcome(tmp_path, scenario, code):
    trace = tmp_path / "run.jsonl"
    done = subprocess.run([sys.executable, "-m", "forge.cli", "run", scenario, "--trace", str(trace)],
                          capture_output=True, text=True)
    assert done.returncode == code, done.stdout + done.stderr
    assert "stopped: " in done.stdout and trace.exists()


def test_forge_demo_exits_three_when_the_run_needs_input(tmp_path):
    done = subprocess.run([sys.executable, "-m", "forge.cli", "demo", "--scenario", "ambiguous", "--workspace",
                           str(tmp_path / "demo")], capture_output=True, text=True)
    assert done.returncode == 3 and "clarification_required" in done.stdout


# 22. the distribution has a name of its own


def test_the_distribution_name_is_not_taken_and_the_import_is_forge():
    import tomllib
    from importlib import metadata

    project = tomllib.loads(Path("pyproject.toml").read_text())["project"]
    assert project["name"] == "forge-fsm"
    assert metadata.distribution("forge-fsm").read_text("top_level.txt") in (None, "forge\n")


# 18. the workspace cannot be raced out of


def _swapping(root, outside, stop):
    """Swap root/swap between a real folder and a symlink to `outside` until `stop` is set.
    The tool under test may create root/swap mid-swap (a write makes its parents): every
    step tolerates that, and the next round puts things back."""
    import contextlib
    import os
    import shutil

    def attempt(step, *args):
        with contextlib.suppress(OSError):
            step(*args)

    while not stop.is_set():
        attempt(os.rename, root / "swap", root / "swap_real")
        attempt(os.symlink, outside, root / "swap")
        if (root / "swap").is_symlink():
            attempt(os.unlink, root / "swap")
        elif (root / "swap").is_dir() and (root / "swap_real").exists():
            attempt(shutil.rmtree, root / "swap")
        attempt(os.rename, root / "swap_real", root / "swap")


@pytest.mark.parametrize("operation", ["read", "write"])
def test_swapping_a_folder_for_a_symlink_never_reaches_outside(tmp_path, operation):
    import threading

    from forge.agent.retry import PermanentToolError
    from forge.demo.workspace import Workspace

    root, outside = tmp_path / "ws", tmp_path / "outside"
    (root / "swap").mkdir(parents=True)
    outside.mkdir()
    (root / "swap" / "a.md").write_text("inside")
    (outside / "a.md").write_text("SECRET")
    workspace = Workspace(root)
    stop = threading.Event()
    swapper = threading.Thread(target=_swapping, args=(root, outside, stop))
    swapper.start()
    leaked, refused = [], 0
    try:
        for n in range(3000):
            try:
                if operation == "read":
                    if workspace.read("swap/a.md") != "inside":
                        leaked.append(n)
                else:
                    workspace.write("swap/a.md", "written")
            except PermanentToolError:
                refused += 1
    finally:
        stop.set()
        swapper.join()
    assert leaked == [] and (outside / "a.md").read_text() == "SECRET"
    assert refused > 0  # the race was really run: some attempts met the symlink and were refused


# 23. code health


def test_every_error_forge_exports_is_a_forge_error_except_the_signals_tools_raise():
    import forge
    from forge import ForgeError, ToolSignal

    errors = [getattr(forge, n) for n in forge.__all__
              if isinstance(getattr(forge, n), type) and issubclass(getattr(forge, n), BaseException)]
    assert len(errors) > 10
    signals = {"ToolSignal", "TransientToolError", "PermanentToolError", "ToolError"}
    assert [e.__name__ for e in errors if not issubclass(e, ForgeError) and e.__name__ not in signals] == []
    assert all(issubclass(getattr(forge, name), ToolSignal) and not issubclass(getattr(forge, name), ForgeError)
               for name in signals)
    assert issubclass(forge.DefinitionError, ValueError) and issubclass(forge.RunFinished, RuntimeError)


def test_the_cli_tells_a_forge_error_in_one_line(tmp_path, capsys):
    (tmp_path / "x.toml").write_text("[machine]\n")
    assert forge_main(["diagram", str(tmp_path / "x.toml"), "--format", "png"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("forge: error: ") and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def _imports(path):
    import ast

    tree = ast.parse(Path(path).read_text())
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    return names | {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}


FORGE = Path(__file__).resolve().parents[1] / "forge"


def test_the_seed_stage_package_names_no_machine_types():
    stages = sorted((FORGE / "agent").glob("*.py"))
    assert len(stages) >= 7  # found wherever the tests run from
    for path in stages:
        text = Path(path).read_text()
        assert not any(name.startswith("forge.machine") for name in _imports(path)), path
        assert "TransitionRecord" not in text and "Trace" not in text.replace("Traceback", ""), path


def test_the_debugger_depends_neither_on_the_demo_nor_on_the_loop_at_import():
    debugger = sorted((FORGE / "debug").glob("*.py"))
    assert debugger
    for path in debugger:
        assert not any(name.startswith("forge.demo") for name in _imports(path)), path
    probe = "import sys, forge.debug.session; print('forge.loop' in sys.modules, 'forge.demo' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]


def test_closed_sets_are_typed_as_literals():
    import typing

    from forge import LoopResult, Observation
    from forge.records.definition import StateDef

    assert typing.get_args(typing.get_type_hints(Observation)["status"]) == ("ok", "retryable_error", "fatal_error")
    outcome = typing.get_type_hints(LoopResult)["outcome"]
    assert set(typing.get_args(typing.get_args(outcome)[0])) == {"success", "failure", "needs_input"}
    assert typing.get_type_hints(StateDef)["outcome"] == outcome


# 17. the debugger steps back and forth in constant work per step


def test_stepping_back_and_forward_in_a_long_session_touches_one_observation(monkeypatch):
    from builders import tool

    from forge import AgentLoop, Intent
    from forge.agent.observations import LoopState

    loop = AgentLoop([tool("a", required={"n"})], lambda goal, state: Intent({"a"}, {"n": state.step_count}),
                     verify=lambda o: False, max_steps=1000, limits=Limits(repeat_limit=10))
    session = loop.debug("goal")
    session.continue_()
    assert session.loop_state.step_count == 1000
    state = session.loop_state
    noted = []
    original = LoopState._note

    def counting(self, name):
        noted.append(name)
        original(self, name)

    monkeypatch.setattr(LoopState, "_note", counting)
    for _ in range(4):  # back over verify, observe, execute, select: one observation undone
        session.back()
    assert session.loop_state is state and state.step_count == 999 and noted == []
    for _ in range(4):
        session.step()  # replayed from the recording
    assert state.step_count == 1000 and len(noted) == 1
    assert session.done and session.result.reason == "step_budget_exhausted"
