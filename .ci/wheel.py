#!/usr/bin/env python3
"""CI's wheel job: what a user who runs `pip install forge-fsm[EXTRA]` gets.

Builds the wheel from a copy of the checkout, then, for the core and for each extra in
pyproject.toml, installs it into a fresh virtual environment outside the checkout and runs,
from a folder that holds no forge source: `forge --version`, an import of `forge` and of the
modules that extra is for. The core's own environment runs `forge --help`; the `schema`
one runs the README's Quickstart and checks what it prints; one environment with every
extra (and pytest, which forge.testing plugs into) imports every module the wheel ships, runs
`forge ui --help`, and runs every page of the documentation site as a reader runs it, each
in an empty folder of its own, each Python block alone (tests/reader.py): the complete LLM
agent of docs/llm-agents.md with its local chat server, `forge examples` and every command.
Exits non-zero, naming the step, at the first failure.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXTRA_MODULES = {  # the modules each extra is what makes importable
    "": ["forge", "forge.cli", "forge.loop"],
    "schema": ["forge.tools"],
    "mcp": ["forge.mcp"],
    "llm": ["forge.models.chat"],
    "otel": ["forge.observe.otel"],
    "durable": ["forge.durable", "forge.durable.worker"],
    "ui": ["forge.ui", "forge.ui.app"],
    "evals": ["forge.evals", "forge.evals.command"],
    "code": ["forge.code_tool"],
}


def run(step: str, command: list[str], cwd: Path, expect: str | None = None) -> str:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0 or (expect is not None and expect not in done.stdout):
        print(f"wheel: FAILED {step}: {' '.join(command)} (exit {done.returncode})", file=sys.stderr)
        print(done.stdout[-4000:], done.stderr[-4000:], sep="\n", file=sys.stderr)
        sys.exit(1)
    print(f"wheel: ok  {step}", flush=True)
    return done.stdout


def build(into: Path) -> Path:
    source = into / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".venv", ".git", "build", "*.egg-info", "__pycache__", ".hypothesis", ".pytest_cache", ".mcp-servers",
        ".forge-traces", ".forge-cover-tests", "demo-run"))
    run("build the wheel", [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(into / "dist"),
                            str(source)], into)
    return next((into / "dist").glob("forge_fsm-*.whl"))


def environment(into: Path, wheel: Path, extras: str, *besides: str) -> Path:
    folder = into / f"venv-{extras.replace(',', '-') or 'core'}"
    venv.create(folder, with_pip=True)
    python = folder / "bin" / "python"
    spec = f"{wheel}[{extras}]" if extras else str(wheel)
    run(f"install forge-fsm[{extras}]", [str(python), "-m", "pip", "install", "--quiet",
                                          "--disable-pip-version-check", spec, *besides], into)
    return folder / "bin"


def quickstart() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quickstart", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]


def site(bin_: Path, scratch: Path, every: str) -> None:
    """Every page of the documentation site, run as a reader runs it with this wheel."""
    sys.path.insert(0, str(ROOT / "tests"))
    from reader import SITE, run_page

    for page in SITE:
        failures = run_page(page, scratch / page.stem, bin_)
        if failures:
            print(f"wheel: FAILED [{every}] docs/{page.name} as a reader runs it", *failures, sep="\n", file=sys.stderr)
            sys.exit(1)
        print(f"wheel: ok  [{every}] docs/{page.name} as a reader runs it", flush=True)


def main() -> int:
    extras = list(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    with tempfile.TemporaryDirectory(prefix="forge-wheel-") as scratch:
        into = Path(scratch)
        wheel = build(into)
        shipped = sorted(name[:-3].replace("/", ".").removesuffix(".__init__")
                         for name in zipfile.ZipFile(wheel).namelist()
                         if name.startswith("forge/") and name.endswith(".py") and not name.endswith("__main__.py")
                         and not name.startswith("forge/examples/"))
        elsewhere = into / "elsewhere"
        elsewhere.mkdir()
        for extra in ["", *(e for e in extras if e != "test")]:
            bin_ = environment(into, wheel, extra)
            name = extra or "core"
            run(f"[{name}] forge --version", [str(bin_ / "forge"), "--version"], elsewhere, expect="forge")
            modules = [*EXTRA_MODULES[""], *(EXTRA_MODULES.get(extra, []) if extra else [])]
            run(f"[{name}] import {', '.join(modules)}",
                [str(bin_ / "python"), "-c", f"import {', '.join(modules)}; import forge; "
                 f"assert '{into}' in forge.__file__, forge.__file__"], elsewhere)
            if extra == "":
                run("[core] forge --help", [str(bin_ / "forge"), "--help"], elsewhere, expect="usage")
            if extra == "evals":
                run("[evals] the example eval, offline from its cassettes",
                    [str(bin_ / "forge"), "eval", str(ROOT / "examples/evals/workspace.yaml"), "--loop",
                     str(ROOT / "examples/evals/workspace_agent.py") + ":make_loop", "--offline", "--min-score", "1"],
                    elsewhere, expect="5 of 5 cases passed")
            if extra == "schema":
                (elsewhere / "quickstart.py").write_text(quickstart())
                run("[schema] the README's Quickstart", [str(bin_ / "python"), "quickstart.py"], elsewhere,
                    expect="verified_success 2")
        every = ",".join(e for e in extras if e != "test")
        bin_ = environment(into, wheel, every, "pytest")  # forge.testing is a pytest plugin
        run(f"[{every}] forge ui --help", [str(bin_ / "forge"), "ui", "--help"], elsewhere, expect="--db")
        site(bin_, into / "site", every)
        importer = ("import importlib, sys\n"
                    f"for name in {shipped!r}:\n"
                    "    importlib.import_module(name)\n"
                    "print(len(sys.modules))\n")
        run(f"[{every}] import each of the {len(shipped)} modules the wheel ships",
            [str(bin_ / "python"), "-c", importer], elsewhere)
        old_names = ("import importlib, warnings\n"
                     "from forge.moved import MOVED\n"
                     "for old, new in MOVED.items():\n"
                     "    with warnings.catch_warnings(record=True) as told:\n"
                     "        warnings.simplefilter('always')\n"
                     "        moved, made = importlib.import_module(old), importlib.import_module(new)\n"
                     "    assert told and f'{old} is {new} now' in str(told[0].message), (old, told)\n"
                     "    assert all(getattr(moved, n) is getattr(made, n) for n in made.__all__), old\n"
                     "print(len(MOVED))\n")
        run(f"[{every}] import each old name of a moved module (forge.moved)",
            [str(bin_ / "python"), "-c", old_names], elsewhere)
    return 0


if __name__ == "__main__":
    sys.exit(main())
