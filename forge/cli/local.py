"""The commands that run a loop in this process: `forge run` (a scenario file, or a fork of a
recorded run), `forge demo` and `forge examples` (the files the documentation runs)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from typing import Any

from forge.cli.arguments import positive
from forge.cli.exits import exit_code
from forge.cli.references import patch_of
from forge.errors import UsageError

__all__ = ["SCENARIOS", "demo_command", "examples_command", "run_command"]


SCENARIOS = ("index", "ambiguous", "forbidden", "unreachable", "gap", "mcp")
"""The demo's scenarios, as `forge.demo.scenarios.SCENARIOS` has them (here so that the parser
loads no demo; a test pins they agree)."""


def run_command(commands: Any) -> None:
    run = commands.add_parser("run", help="run a scenario file to its end; exit 0 success, 1 failure, 3 needs input")
    run.add_argument("scenario", metavar="SCENARIO",
                     help="a .py file or module defining `loop` and `goal`, or a demo scenario name")
    run.add_argument("--trace", default="run.jsonl", metavar="PATH", help="where to write the trace (default: run.jsonl)")
    run.add_argument("--fork", metavar="RUN.jsonl",
                     help="fork this recorded run instead: replay it up to --at K, then go on live")
    run.add_argument("--at", type=positive, metavar="K",
                     help="with --fork: the transition to go live at (default: where the scenario first departs "
                          "from the recording)")
    run.add_argument("--patch", metavar="FILE.json", help="with --fork: the outcome to put in place of the one at K")
    run.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from forge.narrate import describe
    from forge.records.journal import JournalEncodeError
    from forge.records.trace import write_trace
    from forge.scenario import load_scenario

    if (args.at is not None or args.patch) and not args.fork:
        raise UsageError("--at and --patch fork a recorded run: forge run SCENARIO --fork RUN.jsonl --at K")
    scenario = load_scenario(args.scenario)
    try:
        if args.fork:
            from forge.observe import TransitionCallback

            shown = TransitionCallback(lambda record: print(describe(record), flush=True))
            result = scenario.loop.fork(args.fork, at=args.at, patch=patch_of(args.patch) if args.patch else None,
                                        observers=[shown])
        else:
            result = scenario.loop.run(scenario.goal, on_transition=lambda record: print(describe(record), flush=True))
    finally:
        scenario.close()
    try:
        trace = write_trace(result.trace, args.trace, journal=result.journal)
    except JournalEncodeError as error:  # the trace is still worth having: write it without the journal
        trace = write_trace(result.trace, args.trace)
        print(f"note: the trace has no journal, so it cannot be replayed: {error}", file=sys.stderr)
    print(f"\nstopped: {result.summary}")
    if result.answer is not None:
        print(f"answer: {result.answer}")
    if result.question is not None:
        print(f"question: {result.question}")
    if result.usage:
        print(f"usage: {result.usage}")
    origin = getattr(result.journal, "forked_from", None)
    if origin is not None:
        print(f"forked from run {origin.run_id} at transition {origin.transition}")
    print(f"trace: {trace}")
    return exit_code(result.outcome)


def demo_command(commands: Any) -> None:
    demo = commands.add_parser("demo", help="run a real agent on a real goal, with a trace and a diagram")
    demo.add_argument("--workspace", metavar="DIR", help="folder to work in (default: a new temporary folder)")
    demo.add_argument("--scenario", choices=SCENARIOS, default="index", help="which run to show (default: index)")
    demo.add_argument("--llm", action="store_true",
                      help="let a chat model plan (OPENAI_BASE_URL and OPENAI_API_KEY name the endpoint)")
    demo.add_argument("--model", help="the model's name with --llm (default: OPENAI_MODEL, else gpt-4o-mini)")
    demo.set_defaults(handler=_demo)


def _demo(args: argparse.Namespace) -> int:
    from forge.demo import run_demo

    policy = None
    if args.llm:
        missing = [name for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY") if not os.environ.get(name)]
        if missing:
            print(f"forge demo --llm needs an OpenAI-compatible chat-completions endpoint: set {' and '.join(missing)} "
                  "(and --model NAME or OPENAI_MODEL)", file=sys.stderr)
            return 2
        if args.scenario == "mcp":
            raise UsageError("--llm runs the index scenarios; the mcp scenario has its own planner")
        from forge.demo.scenarios import LLM_SYSTEM
        from forge.models.chat import ChatPolicy

        policy = ChatPolicy(args.model or os.environ.get("OPENAI_MODEL") or "gpt-4o-mini", system=LLM_SYSTEM)
    report = run_demo(args.workspace, args.scenario, policy=policy)
    return exit_code(report.result.outcome)


def examples_command(commands: Any) -> None:
    examples = commands.add_parser("examples", help="write the examples the documentation runs into a folder")
    examples.add_argument("folder", nargs="?", default="examples", metavar="DIR",
                          help="where to write them (default: examples)")
    examples.add_argument("--force", action="store_true", help="overwrite files there that differ")
    examples.set_defaults(handler=_examples)


def _examples(args: argparse.Namespace) -> int:
    """`forge examples [DIR]`: the example files forge ships (`forge.examples`, the
    repository's examples/) written into DIR, so that every command of the documentation
    runs from an installed wheel. Files already there with the same bytes are left; files
    that differ are refused, all of them named and none written, unless `--force`."""
    from importlib.resources import files
    from pathlib import Path

    from forge.files import write_atomically

    target = Path(args.folder)
    bundled = dict(_bundled_files(files("forge.examples")))
    differing = sorted(name for name, data in bundled.items()
                       if (target / name).is_file() and (target / name).read_bytes() != data)
    if differing and not args.force:
        raise UsageError(f"{target} already has {len(differing)} of the examples, changed: {', '.join(differing)} "
                         "(--force overwrites them)")
    for name, data in bundled.items():
        write_atomically(target / name, data)
    print(f"wrote {len(bundled)} example files into {target}/: "
          + ", ".join(name for name in bundled if "/" not in name))
    return 0


def _bundled_files(folder: Any, prefix: str = "") -> Iterator[tuple[str, bytes]]:
    """Each example file under `folder` (an importlib Traversable): its path below it and its
    bytes, in name order, without Python's caches."""
    for entry in sorted(folder.iterdir(), key=lambda entry: entry.name):
        if entry.name == "__pycache__" or entry.name.startswith("."):
            continue
        if entry.is_dir():
            yield from _bundled_files(entry, f"{prefix}{entry.name}/")
        elif entry.name.endswith((".py", ".toml", ".yaml", ".jsonl")):
            yield f"{prefix}{entry.name}", entry.read_bytes()
