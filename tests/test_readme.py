"""The README cannot rot: every shell command and Python snippet of the README and of the
benchmarks' page is executed here, and the documentation site builds strictly (its pages
are run as a reader runs them by tests/test_site.py).

`sh` blocks run line by line from the root of a copy of the repository in a temporary folder
(its `.venv` a link to this checkout's, and `.venv/bin/` read as the bin folder of the Python
running the tests), so they write nothing into the checkout: the user's own `demo-run/`
and the tracked files stay as they are; `python` blocks run in order in one namespace, in a fresh
folder, and a `print(...)  # expected` line must print what its comment says. The one
command not run here is `python3 tasks.py test`: it is the command running this suite.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from reader import SITE, blocks, commands, said

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "benchmarks" / "README.md"]
"""What is run here: the front page and the benchmarks' own page (commands of the checkout)."""
README = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
BLOCKS = re.findall(r"^```(\w+)\n(.*?)^```", README, re.S | re.M)
BIN = str(Path(sys.executable).parent)
SELF = "python3 tasks.py test"


def shell_lines(blocks=None):
    for lang, body in BLOCKS if blocks is None else blocks:
        if lang == "sh":
            yield from commands(body)


SETUP = "python3 tasks.py demo"
"""Run in the checkout itself: it may install forge into `.venv` (ignored by git) and the demo
it runs works in a temporary folder. In the copy it would install the copy in its place."""


def run_shell(command, root):
    """`command` as a user runs it, in the copy `root` (the setup command in the checkout),
    its temporary files (the demo's workspace, which it keeps for the user) in a temporary
    folder of the test's own."""
    command = command.replace(".venv/bin/", f"{BIN}/")
    return subprocess.run(["bash", "-c", command], cwd=ROOT if command == SETUP else root, capture_output=True,
                          text=True, timeout=600, env=dict(os.environ, TMPDIR=str(TEMPORARY[root])))


TEMPORARY: dict = {}
"""Each copy's temporary folder (open to the PostgreSQL server's own user, which a benchmark
starts), removed with the copy's test module."""


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """A copy of the repository to run the README's commands in, as a user's fresh clone."""
    root = tmp_path_factory.mktemp("readme") / "forge"
    shutil.copytree(ROOT, root, symlinks=True, ignore=shutil.ignore_patterns(
        ".venv", ".git", "demo-run", ".mcp-servers", ".forge-traces", ".forge-cover-tests", "__pycache__",
        ".hypothesis", ".pytest_cache", "*.egg-info", "build", "dist", "forge-demo-*"))
    if (ROOT / ".venv").exists():
        (root / ".venv").symlink_to(ROOT / ".venv")
    TEMPORARY[root] = Path(tempfile.mkdtemp(prefix="readme-tmp-"))
    TEMPORARY[root].chmod(0o755)
    yield root
    shutil.rmtree(TEMPORARY.pop(root), ignore_errors=True)


def test_readme_has_the_two_setup_commands():
    commands = list(shell_lines())
    assert commands[:2] == [SETUP, SELF]


BENCHMARKS = list(shell_lines(re.findall(r"^```(\w+)\n(.*?)^```", PAGES[-1].read_text(encoding="utf-8"),
                                         re.S | re.M)))
"""The benchmarks page's commands: they read and write nothing the other pages' commands use,
so they run beside them (in a thread of their own), not after them."""


def test_every_shell_command_in_the_readme_succeeds(checkout):
    import threading

    outputs: dict = {}
    beside = threading.Thread(target=lambda: outputs.update({command: run_shell(command, checkout)
                                                             for command in BENCHMARKS}))
    beside.start()
    for command in shell_lines():
        if command == SELF or command in BENCHMARKS:
            continue
        outputs[command] = run_shell(command, checkout)
    beside.join()
    for command, done in outputs.items():
        assert done.returncode == 0, f"{command!r} failed:\n{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stderr, command


def test_every_python_snippet_in_the_readme_runs_and_prints_what_it_says(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for lang, body in BLOCKS:
        if lang != "python":
            continue
        exec(compile(body, "README.md", "exec"), namespace)
        printed = capsys.readouterr().out.splitlines()
        got = iter(printed)
        for want in said(body):
            assert any(line.strip() == want for line in got), f"README says {want!r}; printed {printed}"


def test_the_excerpts_of_examples_on_the_pages_are_in_the_example_files():
    examples = [path.read_text(encoding="utf-8") for path in sorted((ROOT / "examples").glob("*.py"))]
    excerpts = [block.body for page in [ROOT / "README.md", *SITE] for block in blocks(page) if block.lang == "py"]
    assert excerpts
    for body in excerpts:  # each excerpt comes whole from one example file
        assert any(all(line.strip() in example for line in body.splitlines()) for example in examples), body


def test_every_page_of_the_site_is_in_its_navigation():
    assert {page.name for page in SITE} == {page.name for page in (ROOT / "docs").glob("*.md")}


def test_the_readme_is_a_short_front_page_that_links_every_page_of_the_site():
    front = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(front.splitlines()) <= 250
    for page in SITE[1:]:  # every page but the site's own front page
        assert f"(docs/{page.name})" in front, page.name


def test_the_command_line_reference_is_what_the_command_line_says():
    from forge.cli import reference_markdown

    assert (ROOT / "docs" / "cli.md").read_text(encoding="utf-8") == reference_markdown(), (
        "docs/cli.md is stale: python -c \"from forge.cli import reference_markdown as r; print(r(), end='')\" "
        "> docs/cli.md")


def test_the_documentation_site_builds_strictly(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "api" / "index.html").read_text().count("doc-heading") > 10
    assert 'href="../code.css"' in (tmp_path / "site" / "llm-agents" / "index.html").read_text()  # long lines wrap
    assert "pre-wrap" in (tmp_path / "site" / "code.css").read_text()


def _block_under(page, heading):
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    section = text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```python\n(.*?)^```", section, re.S | re.M)[0]


def test_the_complete_llm_agent_runs_alone_as_a_reader_copies_it(tmp_path):
    """docs/llm-agents.md's first example is whole: it runs in a fresh interpreter, in an
    empty folder, and prints what its comments say (issue 54, item 2)."""
    body = _block_under("llm-agents.md", "## A complete agent, offline")
    done = subprocess.run([sys.executable, "-c", body], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    printed = done.stdout.splitlines()
    for line in body.splitlines():
        if line.lstrip().startswith("print(") and "  #" in line:
            assert line.split("#", 1)[1].strip() in printed
    assert printed[:3] == ["called weather", "called weather", "called send_note"]


def test_the_sites_home_page_links_every_page():
    home = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([a-z-]+\.md)", home))
    assert {page.name for page in SITE} - {"index.md"} <= linked


def _yaml_blocks(page):
    return re.findall(r"^```yaml\n(.*?)^```", (ROOT / "docs" / page).read_text(encoding="utf-8"), re.S | re.M)


def test_the_evals_page_shows_the_example_dataset_whole():
    assert (ROOT / "examples" / "evals" / "workspace.yaml").read_text(encoding="utf-8") in _yaml_blocks("evals.md")


def test_every_scorers_yaml_form_on_the_evals_page_loads_as_that_scorer(tmp_path):
    pytest.importorskip("pydantic_evals")
    from forge.evals.dataset import load_dataset
    from forge.evals.scorers import SCORERS

    shown = next(block for block in _yaml_blocks("evals.md") if block.startswith("name: every-scorer"))
    (tmp_path / "every.yaml").write_text(shown)
    loaded = load_dataset(tmp_path / "every.yaml")
    used = {type(evaluator).__name__ for evaluator in loaded.cases[0].evaluators}
    assert used == {scorer.__name__ for scorer in SCORERS}  # each of forge's scorers, in a form that loads
