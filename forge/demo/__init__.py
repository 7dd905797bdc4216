"""`forge demo`: a real agent doing real work, in a workspace of its own.

`run_demo()` seeds a workspace with notes, starts a flaky HTTP service on 127.0.0.1, runs the
indexing agent (or another scenario), prints one line per transition and a summary, and
leaves the trace (JSONL) and the diagram with the run overlaid (SVG) in `WORKSPACE/run/`.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from forge.demo.scenarios import SCENARIOS, Scenario, build_scenario
from forge.diagram import GraphvizNotInstalled, render
from forge.errors import UsageError
from forge.inspect import write as write_inspector
from forge.narrate import describe
from forge.policy import Policy
from forge.records.trace import error_text, write_trace
from forge.result import LoopResult

__all__ = ["SCENARIOS", "DemoReport", "Scenario", "build_scenario", "prepare_workspace", "run_demo"]

MARKER = ".forge-demo"


@dataclass(frozen=True, slots=True)
class DemoReport:
    scenario: str
    result: LoopResult
    workspace: Path
    trace_path: Path
    diagram_path: Path
    expected: str
    inspector_path: Path | None = None


def prepare_workspace(path: str | Path | None) -> Path:
    """A fresh temporary folder, or `path` made ready (created, or reset if an earlier demo
    made it).

    Raises:
        ValueError: `path` exists, is not empty, and was not made by `forge demo`.
    """
    if path is None:
        root = Path(tempfile.mkdtemp(prefix="forge-demo-"))
    else:
        root = Path(path)
        if root.exists() and not root.is_dir():
            raise UsageError(f"workspace {root} exists and is not a folder")
        if root.is_dir() and any(root.iterdir()) and not (root / MARKER).exists():
            raise UsageError(f"workspace {root} is not empty and was not made by forge demo; choose a new folder")
        if root.is_dir():
            for child in root.iterdir():
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        root.mkdir(parents=True, exist_ok=True)
    (root / MARKER).write_text("made by forge demo; it may delete what is in this folder\n")
    return root


def run_demo(workspace: str | Path | None = None, scenario: str = "index", out: TextIO | None = None,
             policy: Policy | None = None) -> DemoReport:
    """Run one scenario end to end and report on `out` (default: the current sys.stdout);
    `policy` replaces its planner.

    Raises:
        ValueError: unknown scenario, or an unusable workspace.
    """
    out = out if out is not None else sys.stdout
    if scenario not in SCENARIOS:
        raise UsageError(f"unknown scenario {scenario!r}; scenarios are {', '.join(SCENARIOS)}")
    root = prepare_workspace(workspace)
    built = build_scenario(scenario, root, policy)
    try:
        print(f"forge demo · scenario {scenario!r}: {built.description}", file=out)
        print(f"workspace {root}  ·  {built.where}", file=out)
        if policy is not None:
            print(f"policy: {policy!r:.120}", file=out)
        print(f"goal: {built.goal}\n", file=out)
        result = built.loop.run(built.goal, on_transition=lambda record: print(describe(record), file=out, flush=True))
    finally:
        built.close()
    run_dir = root / "run"
    trace_path = write_trace(result.trace, run_dir / "trace.jsonl")
    try:
        diagram_path = render(built.loop.definition, run_dir / "loop.svg", trace=result.trace)
        drawn = f"{diagram_path} (the loop with this run overlaid)"
    except GraphvizNotInstalled:
        diagram_path = render(built.loop.definition, run_dir / "loop.dot", trace=result.trace)
        drawn = f"{diagram_path} (Graphviz's dot is not installed, so DOT source instead of SVG)"
    inspector_path = write_inspector(result, run_dir / "run.html")
    print(file=out)
    print(f"stopped: {result.reason} ({result.outcome}) after {result.steps} steps, "
          f"{len(result.trace)} transitions", file=out)
    if result.error is not None:
        print(f"because: {error_text(result.error)}", file=out)
    print(f"retries: {result.retries}  ·  side effects run: {result.side_effects_run}, "
          f"replayed: {result.side_effects_replayed}", file=out)
    if result.reason == "verified_success" and scenario == "mcp":
        print(f"repository: {root / 'repo'} (read back with git: every note committed, tree clean)", file=out)
    elif result.reason == "verified_success":
        print(f"index: {root / 'INDEX.md'} (read back and verified against the notes)", file=out)
    print(f"trace: {trace_path}", file=out)
    print(f"diagram: {drawn}", file=out)
    print(f"inspector: {inspector_path} (open it in a browser: the run on its diagram, step by step)", file=out)
    return DemoReport(scenario, result, root, trace_path, diagram_path, built.expected, inspector_path)
