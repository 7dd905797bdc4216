"""`forge inspect A.jsonl --against B.jsonl`: both paths on one diagram, the divergence
marked, the timelines aligned."""

from __future__ import annotations

import subprocess
import sys

import pytest
from test_fork import Counting, _counting_loop, _first_tool_transition

from forge import Patch, write_trace
from forge.diagram.dot import FIRST_ONLY, SECOND_ONLY
from forge.inspect.compare import comparison_html


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("compare")
    loop = _counting_loop(Counting(6), [])
    source = loop.run("count")
    at = _first_tool_transition(source, 3)
    stopped = loop.fork(source, at=at, patch=Patch.tool_error("disk full"))
    assert stopped.reason == "fatal_error"
    write_trace(source.trace, folder / "a.jsonl", journal=source.journal)
    write_trace(stopped.trace, folder / "b.jsonl", journal=stopped.journal)
    return folder, source, stopped, at


def test_the_page_names_the_divergence_and_marks_its_row_and_state(runs):
    _, source, stopped, at = runs
    page = comparison_html(source, stopped)
    assert f"the runs diverge at transition {at} (A: {len(source.trace)} transitions, B: {len(stopped.trace)})" in page
    assert f'<tr class="fc-differs fc-diverge" id="t{at}"><td class="fc-n">◆ {at}</td>' in page
    assert "the runs diverge here" in page
    assert page.count('class="fc-same"') == at - 1


def test_edges_only_one_run_took_are_drawn_in_that_runs_colour(runs):
    _, source, stopped, _ = runs
    page = comparison_html(source, stopped)
    assert f'stroke="{FIRST_ONLY}"' in page  # the source's finish and success, which the fork never reached
    assert f'stroke="{SECOND_ONLY}"' in page  # the fork's stop in fatal_error
    assert "A×" in page and "B×" in page


def test_names_are_escaped(runs):
    _, source, stopped, _ = runs
    page = comparison_html(source, stopped, names=("<a>.jsonl", "b&c.jsonl"))
    assert "&lt;a&gt;.jsonl" in page and "b&amp;c.jsonl" in page and "<a>.jsonl" not in page


def test_forge_inspect_against_writes_the_comparison(runs, tmp_path):
    folder, _, _, at = runs
    done = subprocess.run([sys.executable, "-m", "forge", "inspect", str(folder / "a.jsonl"), "--against",
                           str(folder / "b.jsonl"), "-o", str(tmp_path / "compare.html")], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"the runs diverge at transition {at}" in (tmp_path / "compare.html").read_text()


def test_a_run_against_itself_is_equal_and_shows_every_row_once_dimmed(runs):
    folder, source, _, _ = runs
    page = comparison_html(folder / "a.jsonl", source)
    assert f"the runs are equal: {len(source.trace)} transitions each" in page
    assert page.count('class="fc-same"') == len(source.trace)
