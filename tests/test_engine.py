import ast
import gc
import weakref
from pathlib import Path

import pytest

from builders import intent, scripted_loop, tool
from forge import NoTransitionEnabled, RunFinished, load_definition
from forge.machine.engine import engine_for


def test_stage_modules_never_import_transitions():
    for path in Path("forge/agent").glob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert not any(name.split(".")[0] == "transitions" for name in imported), path


def test_only_the_engine_imports_transitions():
    importers = {
        path.as_posix() for path in Path("forge").rglob("*.py")
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


def test_two_enabled_transitions_raise_instead_of_first_match(tmp_path):
    text = Path("machines/single_agent.toml").read_text().replace(
        'dest = "capability_gap"\nguard = "no_tool_fits"', 'dest = "capability_gap"\nguard = "tool_selected"'
    )
    path = tmp_path / "twice.toml"
    path.write_text(text)
    loop = scripted_loop([tool("a")], [intent("a")], definition=path)
    with pytest.raises(NoTransitionEnabled, match="2 transitions enabled"):
        loop.run("goal")


def test_result_of_unfinished_run_is_refused():
    loop = scripted_loop([tool("a")], [intent("a")])
    with pytest.raises(ValueError, match="not finished"):
        loop.result(loop.start("goal"))
