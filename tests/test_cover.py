"""`forge cover`: which transitions of a definition recorded runs took, and tests generated
for the ones they never took."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from forge import AgentLoop, Finish, Intent, ScriptedPolicy, load_definition, tool, write_trace
from forge.cover import Edge, cover, took
from forge.cover.generate import write_tests

HERE = Path(__file__).parent


@tool
def look(n: int = 0) -> str:
    """Look."""
    return "seen"


def _run(*decisions, verify=lambda o: isinstance(o.payload, Finish), **options):
    return AgentLoop([look], ScriptedPolicy(decisions), verify, **options).run("look")


def test_coverage_counts_each_transition_taken_and_lists_those_never_taken():
    coverage = cover(load_definition("single_agent"), [_run(Intent.call("look"), Finish("ok")).trace])
    assert coverage.taken[Edge("select", "choose", "execute", "tool_selected")] == 1
    assert coverage.taken[Edge("verify", "stop", "verified_success", "decided_verified_success")] == 1
    assert Edge("select", "choose", "capability_gap", "no_tool_fits") in coverage.untaken
    assert coverage.percent == pytest.approx(100 * 6 / 18)
    assert str(coverage).splitlines()[0] == "single_agent: 6 of 18 transitions taken (33%) by 1 run"


def test_edges_sharing_source_trigger_and_destination_are_told_apart_by_the_guard_that_held():
    def raising(observation):
        raise RuntimeError("verify broke")

    coverage = cover(load_definition("single_agent"), [_run(Intent.call("look"), verify=raising).trace])
    assert Edge("verify", "stop", "fatal_error", "verify_raised") in coverage.taken
    assert Edge("verify", "stop", "fatal_error", "decided_fatal_error") in coverage.untaken


def test_runs_of_another_definition_and_files_that_are_not_traces_are_not_counted(tmp_path):
    approval = _run(Finish("ok"), definition="approval", approver=lambda request: True)
    write_trace(approval.trace, tmp_path / "approval.jsonl")
    (tmp_path / "notes.jsonl").write_text('{"not": "a trace"}\n')
    coverage = cover(load_definition("single_agent"), [tmp_path])
    assert coverage.runs == 0 and not coverage.taken


def test_forge_trace_dir_keeps_every_finished_runs_trace_for_cover(tmp_path, monkeypatch):
    monkeypatch.setenv("FORGE_TRACE_DIR", str(tmp_path / "kept"))
    result = _run(Intent.call("look"), Finish("ok"))
    kept = tmp_path / "kept" / f"{result.trace.run_id}.jsonl"
    assert kept.exists()
    assert cover(load_definition("single_agent"), [tmp_path / "kept"]).runs == 1


def test_generated_tests_force_every_transition_never_taken_and_pass(tmp_path):
    for name in ("single_agent", "approval"):
        definition = load_definition(name)
        approver = (lambda request: True) if name == "approval" else None
        coverage = cover(definition, [_run(Finish("ok"), definition=name, approver=approver).trace])
        generated = write_tests(definition, coverage.untaken, tmp_path, name)
        assert [f.edge for f in generated.forced] == list(coverage.untaken) and not generated.unforced
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:]
    assert f"{len(list(_tests(tmp_path)))} passed" in done.stdout


def _tests(folder: Path):
    for path in folder.glob("test_cover_*.py"):
        yield from (line for line in path.read_text().splitlines() if line.startswith("def test_"))


def test_a_generated_test_fails_when_its_transition_is_no_longer_taken(tmp_path):
    definition = load_definition("single_agent")
    target = Edge("select", "choose", "capability_gap", "no_tool_fits")
    generated = write_tests(definition, [target], tmp_path, "single_agent")
    text = generated.path.read_text().replace('Intent.call("missing")', 'Finish("x")')
    generated.path.write_text(text)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 1


def test_transitions_of_user_stages_are_named_with_why_they_cannot_be_forced(tmp_path):
    sys.path.insert(0, str(HERE))
    try:
        from user_stages import STAGES
    finally:
        sys.path.remove(str(HERE))
    definition = load_definition(HERE / "definitions" / "budgeted.toml", STAGES)
    generated = write_tests(definition, [Edge.of(t) for t in definition.transitions], tmp_path, "budgeted.toml")
    assert generated.path is None and generated.unforced
    assert "runs stage 'check_budget', which forge cover cannot script" in generated.unforced[0].why


def test_took_reads_a_results_trace():
    result = _run(Intent.call("look"), Finish("ok"))
    assert took(result, "select", "choose", "execute", "tool_selected")
    assert not took(result, "select", "choose", "capability_gap")


def test_forge_cover_prints_the_coverage_and_writes_the_tests(tmp_path):
    write_trace(_run(Finish("ok")).trace, tmp_path / "runs" / "one.jsonl")
    done = subprocess.run([sys.executable, "-m", "forge", "cover", "single_agent", str(tmp_path / "runs"), "--generate",
                           str(tmp_path / "generated")], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "FORGE_TRACE_DIR": ""})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("single_agent: 3 of 18 transitions taken (17%) by 1 run")
    assert f"wrote {tmp_path / 'generated' / 'test_cover_single_agent.py'}: 15 tests" in done.stdout
    missing = subprocess.run([sys.executable, "-m", "forge", "cover", "single_agent", str(tmp_path / "nothing")],
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 1 and "no trace file or folder at" in missing.stderr
