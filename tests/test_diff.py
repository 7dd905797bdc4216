"""`forge.diff` and `forge diff`: where two recorded runs diverge, and what differs."""

from __future__ import annotations

import subprocess
import sys

import pytest
from test_fork import Counting, _counting_loop, _first_tool_transition

from forge import Patch, diff, write_trace


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("diff")
    loop = _counting_loop(Counting(20), [])
    source = loop.run("count to twenty")
    at = _first_tool_transition(source, 10)
    fork = loop.fork(source, at=at, patch=Patch.tool_result(999))
    write_trace(source.trace, folder / "a.jsonl", journal=source.journal)
    write_trace(fork.trace, folder / "b.jsonl", journal=fork.journal)
    again = loop.run("count to twenty")
    write_trace(again.trace, folder / "again.jsonl", journal=again.journal)
    return folder, source, fork, at


def test_a_run_and_its_fork_diverge_at_the_forks_transition(runs):
    _, source, fork, at = runs
    found = diff(source, fork)
    assert found.first == at and not found.equal
    first = [d for d in found.differences if d.transition == at]
    assert ("outcome", "10", "999") in [(d.what, d.a, d.b) for d in first]
    assert ("detail.patched", "—", '{"tool_result": 999}') in [(d.what, d.a, d.b) for d in first]


def test_two_runs_of_the_same_script_are_equal_whatever_their_timing_and_ids(runs):
    folder, source, _, _ = runs
    found = diff(folder / "a.jsonl", folder / "again.jsonl")
    assert found.equal and found.first is None and str(found) == "the runs are equal: 79 transitions each"
    assert diff(source, folder / "a.jsonl").equal


def test_a_run_that_ends_sooner_differs_where_the_other_goes_on(runs):
    _, source, _, _ = runs
    shorter = _counting_loop(Counting(5), []).run("count to twenty")
    found = diff(source, shorter)
    assert found.transitions == (len(source.trace), len(shorter.trace))
    assert any(d.what == "state" and d.b == "—" for d in found.differences)


def test_forge_diff_prints_the_first_divergence_and_exits_1_when_runs_differ(runs):
    folder, _, _, at = runs
    done = subprocess.run([sys.executable, "-m", "forge", "diff", str(folder / "a.jsonl"), str(folder / "b.jsonl")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"the runs diverge at transition {at} ")
    assert lines[1].split() == ["transition", "what", str(folder / "a.jsonl"), str(folder / "b.jsonl")]
    assert any(line.split()[:4] == [str(at), "outcome", "10", "999"] for line in lines)


def test_forge_diff_exits_0_for_equal_runs_and_2_for_a_file_it_cannot_read(runs, tmp_path):
    folder, _, _, _ = runs
    same = subprocess.run([sys.executable, "-m", "forge", "diff", str(folder / "a.jsonl"), str(folder / "again.jsonl")],
                          capture_output=True, text=True, timeout=60)
    assert (same.returncode, same.stdout.strip()) == (0, "the runs are equal: 79 transitions each")
    missing = subprocess.run([sys.executable, "-m", "forge", "diff", str(folder / "a.jsonl"), str(tmp_path / "no")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and missing.stderr.startswith("forge: error:") and "Traceback" not in missing.stderr
