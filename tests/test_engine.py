import ast
import gc
import weakref
from pathlib import Path

import pytest
from builders import intent, scripted_loop, tool

from forge import DefinitionError, Limits, NoTransitionEnabled, RunFinished, load_definition
from forge.machine.engine import LoopEngine, engine_for

FORGE = Path(__file__).resolve().parents[1] / "forge"


def test_stage_modules_never_import_transitions():
    stages = sorted((FORGE / "agent").glob("*.py"))
    assert len(stages) >= 7  # the seven stage modules, wherever the tests run from
    for path in stages:
        tree = ast.parse(path.read_text())
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert not any(name.split(".")[0] == "transitions" for name in imported), path


def test_only_the_engine_imports_transitions():
    importers = {
        path.relative_to(FORGE.parent).as_posix() for path in FORGE.rglob("*.py")
        if "import transitions" in path.read_text() or "from transitions" in path.read_text()
    }
    assert importers == {"forge/machine/engine.py"}


def test_loops_of_one_definition_share_one_engine():
    first = scripted_loop([tool("a")], [intent("a")])
    second = scripted_loop([tool("b")], [intent("b")])
    assert first.engine is second.engine is engine_for(load_definition())


def test_finished_runs_are_not_referenced_by_the_machine():
    loop = scripted_loop([tool("a")], [intent("a")], verify=lambda o: True)
    run = loop.start("goal")
    while not loop.engine.is_terminal(run):
        loop.engine.fire(run)
    ref = weakref.ref(run)
    del run
    gc.collect()
    assert ref() is None


def test_started_runs_are_not_models_of_the_machine():
    loop = scripted_loop([tool("a")], [intent("a")])
    for _ in range(100):
        loop.start("goal")
    assert loop.engine._machine.models == []


def test_firing_a_finished_run_raises():
    loop = scripted_loop([tool("a")], [intent("a")], verify=lambda o: True)
    run = loop.start("goal")
    while not loop.engine.is_terminal(run):
        loop.engine.fire(run)
    with pytest.raises(RunFinished, match="verified_success"):
        loop.engine.fire(run)


BROKEN = Path(__file__).parent / "definitions"


def test_two_enabled_transitions_raise_instead_of_first_match():
    engine = LoopEngine(load_definition(BROKEN / "nondeterministic_same_guard.toml"))
    run = scripted_loop([tool("a")], [intent("a")]).start("goal")
    with pytest.raises(NoTransitionEnabled, match="2 transitions enabled"):
        engine.fire(run)
    assert run.state == "select" and run.trace == []


def test_no_enabled_transition_raises_naming_the_verdict():
    engine = LoopEngine(load_definition(BROKEN / "unhandled_verdict.toml"))
    run = scripted_loop([tool("a")], [intent("a")] * 5, limits=Limits(repeat_limit=1)).start("goal")
    for _ in range(3):
        engine.fire(run)
    with pytest.raises(NoTransitionEnabled, match="verdict 'repeated_action': no transition enabled"):
        engine.fire(run)


@pytest.mark.parametrize("name", ["nondeterministic_same_guard", "unbounded", "skips_verify", "unhandled_verdict"])
def test_a_loop_refuses_a_definition_forge_check_rejects(name):
    with pytest.raises(DefinitionError, match="forge check"):
        scripted_loop([tool("a")], [intent("a")], definition=BROKEN / f"{name}.toml")


def test_result_of_unfinished_run_is_refused():
    loop = scripted_loop([tool("a")], [intent("a")])
    with pytest.raises(ValueError, match="not finished"):
        loop.result(loop.start("goal"))


def test_transition_order_in_the_file_never_changes_a_run(tmp_path):
    text = Path("machines/single_agent.toml").read_text()
    head, *blocks = text.split("[[transitions]]")
    reversed_file = tmp_path / "reversed.toml"
    reversed_file.write_text(head + "".join("[[transitions]]" + b.rstrip() + "\n\n" for b in reversed(blocks)))
    scripts = [
        ([tool("a"), tool("b")], [intent("a"), intent("b")], lambda o: o.tool_name == "b"),
        ([tool("x", {"read"}), tool("y", {"read"})], [intent("read")], lambda o: True),
        ([tool("a")], [intent("a")] * 5, lambda o: False),
    ]
    for tools, intents, verify in scripts:
        forward = scripted_loop(tools, intents, verify).run("goal").trace
        backward = scripted_loop(tools, intents, verify, definition=reversed_file).run("goal").trace
        assert [(r.source, r.trigger, r.dest) for r in forward] == [(r.source, r.trigger, r.dest) for r in backward]


def test_runs_of_one_engine_in_many_threads_do_not_interfere():
    import threading

    from forge import AgentLoop

    def policy(goal, state):
        return intent("a") if state.step_count == 0 else intent("b")

    loop = AgentLoop([tool("a"), tool("b")], policy, verify=lambda o: o.tool_name == "b")
    results = []

    def worker():
        for _ in range(50):
            result = loop.run("goal")
            results.append((result.reason, result.steps, len(result.trace)))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [("verified_success", 2, 8)] * 400


# transitions decides the route


def _conditions_of(engine):
    from forge.machine.engine import ADVANCE

    event = engine.machine.events[ADVANCE]
    return [c for transitions in event.transitions.values() for t in transitions for c in t.conditions]


def test_every_guard_evaluation_goes_through_a_transitions_condition(monkeypatch):
    loop = scripted_loop([tool("a"), tool("b")], [intent("a"), intent("b")], verify=lambda o: o.tool_name == "b")
    seen = []
    for condition in _conditions_of(loop.engine):
        original = condition.func

        def counting(event, original=original, name=original.__name__):
            seen.append((event.model.state, name))
            return original(event)

        monkeypatch.setattr(condition, "func", counting)
    result = loop.run("goal")
    held = [(r.source, g.name) for r in result.trace for g in r.guards if g.value]
    assert seen == held


def test_a_guard_that_cannot_hold_after_the_verdict_is_not_evaluated_and_is_recorded_false(monkeypatch):
    loop = scripted_loop([tool("a"), tool("b")], [intent("a"), intent("b")], verify=lambda o: o.tool_name == "b")
    calls = []
    for condition in _conditions_of(loop.engine):
        original = condition.func
        monkeypatch.setattr(condition, "func", lambda event, original=original: calls.append(1) or original(event))
    result = loop.run("goal")
    assert len(calls) == 2 + 2  # select and verify, on both steps: only the guard of the verdict
    assert [len(r.guards) for r in result.trace] == [9, 0, 0, 6] * 2  # every guard of the state recorded
    select = result.trace[0]
    assert [(g.name, g.value) for g in select.guards if g.value] == [("tool_selected", True)]
    assert sum(g.value for r in result.trace for g in r.guards) == 4


def test_guards_with_a_test_of_their_own_are_all_evaluated(monkeypatch):
    from forge import AgentLoop, ScriptedPolicy
    from forge.machine.stages import BUILTIN_STAGES

    stages = BUILTIN_STAGES.with_guard_test("tool_selected", lambda verdict: verdict == "selected")
    loop = AgentLoop([tool("a")], ScriptedPolicy([intent("a")]), lambda o: True, stages=stages)
    calls = []
    for condition in _conditions_of(loop.engine):
        original = condition.func
        monkeypatch.setattr(condition, "func", lambda event, original=original: calls.append(1) or original(event))
    loop.run("goal")
    assert len(calls) == 9 + 1  # select's guards all called (one has its own test); verify's only the one


def test_a_guard_swapped_in_the_catalog_changes_the_route():
    from forge import AgentLoop, ScriptedPolicy
    from forge.machine.stages import BUILTIN_STAGES

    swapped = (BUILTIN_STAGES.with_guard_test("tool_selected", lambda verdict: False)
               .with_guard_test("no_tool_fits", lambda verdict: verdict in ("selected", "no_tool")))
    normal = scripted_loop([tool("a")], [intent("a")], verify=lambda o: True).run("goal")
    rerouted = AgentLoop([tool("a")], ScriptedPolicy([intent("a")]), lambda o: True, stages=swapped).run("goal")
    assert (normal.reason, rerouted.reason) == ("verified_success", "capability_gap")
    assert [(g.name, g.value) for g in rerouted.trace[0].guards if g.value] == [("no_tool_fits", True)]


def test_a_run_driven_only_through_the_transitions_trigger_api_equals_loop_run():
    from forge.machine.engine import ADVANCE

    def build():
        return scripted_loop([tool("a"), tool("b", side_effect=True)], [intent("a"), intent("b"), intent("a")],
                             verify=lambda o: o.sequence == 3)

    expected = build().run("goal")
    loop = build()
    run = loop.start("goal")
    advance = loop.engine.machine.events[ADVANCE]
    while not loop.engine.is_terminal(run):
        assert advance.trigger(run) is True
    assert run.state == expected.reason == "verified_success"
    assert run.trace == list(expected.trace)
    assert loop.result(run).state.observations == expected.state.observations


def test_definition_triggers_label_the_trace_while_one_transitions_event_fires_them():
    from forge.machine.engine import ADVANCE

    loop = scripted_loop([tool("a")], [intent("a")] * 2, verify=lambda o: o.sequence == 2)
    assert list(loop.engine.machine.events) == [ADVANCE]
    triggers = [r.trigger for r in loop.run("goal").trace]
    assert triggers == ["choose", "call", "record", "replan", "choose", "call", "record", "stop"]


def test_one_loop_serves_sixteen_threads_with_independent_results():
    import threading

    from forge import AgentLoop, Intent

    def policy(goal, state):
        wanted = int(goal.split()[-1])
        return Intent({"count"}, {"n": state.step_count + 1}) if state.step_count < wanted else Intent({"done"})

    loop = AgentLoop([tool("count", required={"n"}, handler=lambda n: n), tool("done")], policy,
                     verify=lambda o: o.tool_name == "done", max_steps=20, limits=Limits(repeat_limit=20))
    results: dict[int, list] = {}
    barrier = threading.Barrier(16)

    def worker(index):
        barrier.wait()
        results[index] = [loop.run(f"count to {index % 5 + 1}") for _ in range(20)]

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for index, runs in results.items():
        wanted = index % 5 + 1
        for result in runs:
            assert (result.reason, result.steps) == ("verified_success", wanted + 1)
            assert [o.payload for o in result.state.observations[:-1]] == list(range(1, wanted + 1))
    assert len(results) == 16
