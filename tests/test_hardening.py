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
