"""The documentation site as a reader runs it (issue 54, item 1): each page in an empty folder
of its own, with nothing from the checkout, only what the page itself gives and the `forge`
that is installed.

A page's blocks run in its order, in the page's folder:

- a block with a title (```` ```python title="notes_agent.py" ````) is a file the reader
  saves: it is written into the folder under that name, and a Python one is run too
  (`python notes_agent.py`), as a reader would to try it;
- any other `python` block runs alone, in a fresh interpreter (`python -c`): it may import
  the page's files, never a name an earlier block made;
- `sh` blocks run line by line (`bash -c`), with the installed forge's bin folder first on
  PATH: `forge examples` is how a page gets the example files it uses;
- a `print(...)  # what it prints` line of a Python block must print what its comment says,
  and a `text` block is a transcript whose every line a command of the page printed.

Used by tests/test_site.py with the checkout's environment, and by .ci/wheel.py with a wheel
installed with every extra outside the checkout.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITE = [ROOT / "docs" / name for name in re.findall(r":\s*(\S+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)]
"""The site's pages in its navigation's order."""

FENCE = re.compile(r'^```(\w+)(?: title="([^"]+)")?\n(.*?)^```', re.S | re.M)


@dataclass(frozen=True)
class Block:
    lang: str
    title: str | None
    body: str


def blocks(page: Path) -> list[Block]:
    return [Block(lang, title or None, body) for lang, title, body in FENCE.findall(page.read_text(encoding="utf-8"))]


def said(body: str) -> list[str]:
    """What the `print(...)  # comment` lines of a Python block say they print."""
    return [line.split("#", 1)[1].strip() for line in body.splitlines()
            if line.lstrip().startswith("print(") and "  #" in line]


def commands(body: str) -> list[str]:
    """An `sh` block's command lines (a `  # comment` after two spaces is not part of one)."""
    lines = (re.split(r"\s{2,}#", line)[0].strip() for line in body.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def run_page(page: Path, folder: Path, bin_folder: Path, timeout: float = 600) -> list[str]:
    """Run `page` as a reader does, in the empty `folder`, with the forge of `bin_folder`
    (its `python` and `forge`); what went wrong, one text each (none: the page works)."""
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PATH": f"{bin_folder}{os.pathsep}{os.environ.get('PATH', '')}",
           "TMPDIR": str(folder)}
    env.pop("PYTHONPATH", None)
    python = str(bin_folder / "python")
    failures: list[str] = []
    printed: list[str] = []
    for number, block in enumerate(blocks(page), 1):
        where = f"{page.name} block {number}" + (f" ({block.title})" if block.title else "")
        if block.title:
            (folder / block.title).parent.mkdir(parents=True, exist_ok=True)
            (folder / block.title).write_text(block.body, encoding="utf-8")
        if block.lang == "python":
            argv = [python, block.title] if block.title else [python, "-c", block.body]
            done = subprocess.run(argv, cwd=folder, capture_output=True, text=True, timeout=timeout, env=env)
            failures += _python_failures(where, block.body, done)
        elif block.lang == "sh":
            for command in commands(block.body):
                done = subprocess.run(["bash", "-c", command], cwd=folder, capture_output=True, text=True,
                                      timeout=timeout, env=env)
                printed += done.stdout.splitlines()
                if done.returncode != 0 or "Traceback" in done.stderr:
                    failures.append(f"{where}: `{command}` exited {done.returncode}:\n{done.stdout[-2000:]}\n"
                                    f"{done.stderr[-3000:]}")
        elif block.lang == "text" and not block.title and printed:
            missing = [line for line in block.body.splitlines() if line.strip() and line.rstrip() not in
                       "\n".join(printed)]
            if missing:
                failures.append(f"{where}: transcript lines no command of the page printed: {missing[:3]}")
    return failures


def _python_failures(where: str, body: str, done: subprocess.CompletedProcess[str]) -> list[str]:
    if done.returncode != 0:
        return [f"{where} failed (exit {done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"]
    lines = iter(line.strip() for line in done.stdout.splitlines())
    for want in said(body):
        if not any(line == want for line in lines):
            return [f"{where} says it prints {want!r}; it printed:\n{done.stdout[-2000:]}"]
    return []


def main(argv: list[str]) -> int:
    """`python tests/reader.py BIN_FOLDER SCRATCH [PAGE.md ...]`: run the site's pages (or the
    named ones) with the forge installed in BIN_FOLDER, each in a folder under SCRATCH."""
    bin_folder, scratch = Path(argv[0]).absolute(), Path(argv[1]).absolute()
    chosen = [page for page in SITE if not argv[2:] or page.name in argv[2:]]
    failed = 0
    for page in chosen:
        failures = run_page(page, scratch / page.stem, bin_folder)
        print(f"site: {'ok    ' if not failures else 'FAILED'} {page.name}", flush=True)
        for failure in failures:
            print(failure, file=sys.stderr)
        failed += bool(failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
