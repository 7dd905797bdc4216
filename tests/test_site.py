"""Every page of the documentation site runs as a reader runs it (issue 54, item 1): in an
empty folder of its own, each Python block alone in a fresh interpreter, its commands with
the installed `forge` (tests/reader.py says how). CI runs the same pages again from a wheel
installed with every extra outside the checkout (.ci/wheel.py)."""

import re
import sys
from pathlib import Path

import pytest
from reader import ROOT, SITE, blocks, run_page

BIN = Path(sys.executable).parent


@pytest.mark.timeout(900)
@pytest.mark.parametrize("page", SITE, ids=[page.name for page in SITE])
def test_the_page_runs_as_a_reader_runs_it(page, tmp_path):
    assert run_page(page, tmp_path / "reader", BIN) == []


@pytest.mark.parametrize("page", SITE, ids=[page.name for page in SITE])
def test_the_page_sends_a_reader_to_nothing_it_does_not_make(page):
    """No path into the checkout: its virtual environment, the demo's folder a README
    command makes, the tests; `examples/` only after `forge examples` (issue 54, item 1)."""
    text = page.read_text(encoding="utf-8")
    commands = "\n".join(block.body for block in blocks(page) if block.lang in ("sh", "python"))
    assert ".venv/bin" not in text and "tests/scenarios" not in commands
    if "demo-run/" in commands:
        assert "--workspace demo-run" in commands  # the page makes it
    if re.search(r"(?<![\w.])examples/", commands):
        assert "forge examples" in commands


def test_the_notes_agent_example_is_the_one_the_loops_page_shows():
    shown = next(block.body for block in blocks(ROOT / "docs" / "loops.md") if block.title == "notes_agent.py")
    assert (ROOT / "examples" / "notes_agent.py").read_text(encoding="utf-8").endswith("\n\n" + shown)
