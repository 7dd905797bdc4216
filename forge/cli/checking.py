"""The commands that judge a loop before and after it runs: `forge check` (proofs over every
path), `forge cover` (which transitions recorded runs took) and `forge eval` (a dataset's
scores, gated)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from forge.cli.arguments import positive
from forge.cli.references import loop_named, stages_of
from forge.errors import MissingFile, UsageError
from forge.records.definition import PROPERTIES

__all__ = ["check_command", "cover_command", "eval_command"]


def check_command(commands: Any) -> None:
    check = commands.add_parser("check", help="prove loop definitions sound before they run")
    check.add_argument("definitions", nargs="*", metavar="DEFINITION",
                       help="files or built-in names, or loops (MODULE:LOOP or PATH.py:LOOP, checked with their own "
                            "stages, limits and tools) (default: every machines/*.toml)")
    check.add_argument("--max-steps", type=positive, default=8, help="the loop's max_steps (default 8)")
    check.add_argument("--repeat-limit", type=positive, default=3, help="the loop's repeat_limit (default 3)")
    check.add_argument("--stages", action="append", default=[], metavar="MODULE:NAME",
                       help="user stages the definitions name: a mapping of Stage objects (repeatable)")
    check.add_argument("--require", action="append", default=[], choices=PROPERTIES, metavar="PROPERTY",
                       help=f"a property to prove over every path (repeatable): {', '.join(PROPERTIES)}")
    check.add_argument("--tools", metavar="MODULE:NAME",
                       help="the loop's tools (an AgentLoop, a Tool or a list), for their side-effect flags")
    check.add_argument("--diagram", metavar="OUT.svg", help="draw the first counterexample in red on the definition")
    check.set_defaults(handler=_check)


def _check(args: argparse.Namespace) -> int:
    import functools

    from forge.check import check_definitions, check_loop, default_definitions

    paths = args.definitions or default_definitions()
    if not paths:
        raise MissingFile("no definitions to check: name files, or run where machines/*.toml exist")
    stages = stages_of(args.stages)

    def progress(path: str, explored: int) -> None:
        print(f"{path}: {explored:,} abstract states explored so far…", file=sys.stderr, flush=True)

    side_effects = _side_effects_of(args.tools) if args.tools else None
    reports = []
    for path in paths:  # a definition, or a loop (MODULE:LOOP, PATH.py:LOOP) checked with its own limits and stages
        loop = loop_named(str(path), "forge check")
        reports += [check_loop(loop, functools.partial(progress, str(path)), args.require)] if loop is not None else \
            check_definitions([path], args.max_steps, args.repeat_limit, stages, progress, args.require, side_effects)
    for report in reports:
        print("\n".join(report.lines()))
    if args.diagram:
        drawn = [r for r in reports if r.violations and r.definition is not None]
        if len(paths) != 1:
            raise UsageError("--diagram draws one definition's counterexample: name exactly one definition")
        if drawn:
            from forge.diagram import render_counterexample

            first = drawn[0].violations[0]
            out = render_counterexample(drawn[0].definition, args.diagram, first.path)  # type: ignore[arg-type]
            print(f"counterexample ({first.property}) drawn in red: {out}")
        else:
            print("no counterexample to draw: every required property holds")
    return 0 if all(report.ok for report in reports) else 1


def _side_effects_of(reference: str) -> bool:
    """Whether any tool `--tools MODULE:NAME` names (an AgentLoop, a Tool, or tools) has a
    side effect."""
    from forge.loop import AgentLoop
    from forge.machine.catalog import import_reference
    from forge.tools import Tool

    found = import_reference(reference, "--tools", "myagent:loop")
    tools = found.tools if isinstance(found, AgentLoop) else [found] if isinstance(found, Tool) else found
    try:
        listed = list(tools)
    except TypeError:
        listed = []
    if not listed or not all(isinstance(t, Tool) for t in listed):
        raise UsageError(f"--tools {reference!r}: expected an AgentLoop, a Tool or a list of Tools, "
                         f"got {type(found).__name__}")
    return any(t.side_effect for t in listed)


def cover_command(commands: Any) -> None:
    coverage = commands.add_parser("cover", help="which transitions of a definition recorded runs took, and which never")
    coverage.add_argument("definition", metavar="DEFINITION", help="a built-in name (single_agent) or a TOML path")
    coverage.add_argument("traces", nargs="+", metavar="TRACES",
                          help="trace files, cassettes, or folders of them (searched for *.jsonl)")
    coverage.add_argument("--generate", metavar="DIR",
                          help="write a pytest test to DIR for each transition never taken that can be forced")
    coverage.add_argument("--stages", action="append", default=[], metavar="MODULE:NAME",
                          help="user stages the definition names (as forge check takes them)")
    coverage.set_defaults(handler=_cover)


def _cover(args: argparse.Namespace) -> int:
    from pathlib import Path

    from forge.cover import cover
    from forge.machine.loader import load_definition

    definition = load_definition(args.definition, stages_of(args.stages))
    coverage = cover(definition, args.traces)
    print(coverage)
    if args.generate:
        from forge.cover.generate import write_tests

        generated = write_tests(definition, coverage.untaken, Path(args.generate), args.definition)
        if generated.path is not None:
            print(f"wrote {generated.path}: {len(generated.forced)} test{'s' if len(generated.forced) != 1 else ''}, "
                  "one for each transition it forces")
        for unforced in generated.unforced:
            print(f"cannot force {unforced.edge}: {unforced.why}")
    return 0


def eval_command(commands: Any) -> None:
    evals = commands.add_parser("eval", help="run a dataset of cases on a loop, score each trajectory, gate on "
                                             "score and regressions (exit 1 when a gate fails)")
    evals.add_argument("dataset", metavar="DATASET", help="a pydantic-evals dataset file (YAML or JSON)")
    evals.add_argument("--loop", required=True, metavar="MODULE:LOOP",
                       help="the AgentLoop, or a function making one per case (a context manager may clean up)")
    evals.add_argument("--cassettes", metavar="DIR",
                       help="the cases' cassettes (default: cassettes/STEM/ beside the dataset)")
    evals.add_argument("--record", action="store_true", help="run every case live and record its cassettes")
    evals.add_argument("--offline", action="store_true",
                       help="replay only: a case without a cassette, or departing from it, fails")
    evals.add_argument("--max-concurrency", type=positive, default=4, metavar="N",
                       help="cases run at once (default 4)")
    evals.add_argument("--out", metavar="DIR", help="write DIR/results.json, DIR/report.html and each run")
    evals.add_argument("--against", metavar="BASELINE",
                       help="an earlier eval's results.json (or its --out folder): show what changed")
    evals.add_argument("--min-score", type=float, metavar="X", help="exit 1 when the eval's score is below X (0 to 1)")
    evals.add_argument("--no-regressions", action="store_true",
                       help="with --against: exit 1 when a case got worse")
    evals.add_argument("--scorers", action="append", default=[], metavar="MODULE:NAME",
                       help="an Evaluator class of yours the dataset names (repeatable)")
    evals.set_defaults(handler=_eval, error_code=2)


def _eval(args: argparse.Namespace) -> int:
    try:
        from forge.evals.command import EvalCommand
    except ImportError as missing:
        raise UsageError(f"forge eval needs the evals extra: pip install 'forge-fsm[evals]' ({missing})") from None
    return EvalCommand(args.dataset, args.loop, args.cassettes, args.record, args.offline, args.max_concurrency,
                       args.out, args.against, args.min_score, args.no_regressions, tuple(args.scorers))()
