"""The commands that draw: `forge diagram` (a definition or a loop, a recorded run or many
stored runs overlaid) and `forge diagrams` (the gallery, or its check)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from forge.cli.exits import one_line
from forge.cli.references import loop_named, machine_of
from forge.errors import UsageError

__all__ = ["FORMATS", "diagram_command", "diagrams_command"]


FORMATS = ("svg", "png", "pdf", "dot", "mermaid")
"""What a diagram is written as, as `forge.diagram.FORMATS` has it (here so that the parser
loads no Graphviz; a test pins they agree)."""


def diagram_command(commands: Any) -> None:
    diagram = commands.add_parser("diagram", help="draw a loop definition, optionally with a run overlaid")
    diagram.add_argument("machine", nargs="?", metavar="MACHINE",
                         help="built-in name or definition file (default: single_agent, or the trace's machine), "
                              "or MODULE:LOOP (or PATH.py:LOOP), an AgentLoop, drawn with the loops it calls")
    diagram.add_argument("-o", "--output", metavar="PATH", help="file to write; without it DOT/Mermaid go to stdout")
    diagram.add_argument("--format", choices=FORMATS, help="default: from PATH's suffix, else dot")
    diagram.add_argument("--trace", metavar="RUN.jsonl", help="overlay this recorded run")
    diagram.add_argument("--runs", metavar="DB", help="draw many stored runs on it: per edge, runs, p50, p95, failed")
    diagram.add_argument("--loop", metavar="NAME", help="with --runs: only the runs of this durable loop")
    diagram.set_defaults(handler=_diagram)


def _diagram(args: argparse.Namespace) -> int:
    from forge.diagram import diagram_text, format_for, render
    from forge.records.trace import read_trace

    if args.runs:
        return _many_runs(args)
    if args.loop:
        raise UsageError("--loop picks the stored runs of one loop: give it with --runs DB")
    trace = read_trace(args.trace) if args.trace else None
    machine: Any = loop_named(args.machine) or machine_of(args.machine, trace)
    fmt = format_for(args.output, args.format)
    if args.output is None:
        if fmt not in ("dot", "mermaid"):
            raise UsageError(f"{fmt} is binary: give -o PATH to write it to a file")
        sys.stdout.write(diagram_text(machine, fmt, trace))
        return 0
    written = _drawn(lambda: render(machine, args.output, fmt, trace))
    if written is None:
        return 1
    print(f"wrote {written}")
    return 0


def _many_runs(args: argparse.Namespace) -> int:
    from pathlib import Path

    from forge.diagram.many import edge_stats, many_runs_digraph
    from forge.diagram.render import format_for, image_of
    from forge.durable.runs import StoredRuns
    from forge.files import write_atomically
    from forge.machine.loader import load_definition

    if args.trace:
        raise UsageError("--runs draws many stored runs; --trace one recorded run: give one of them")
    with StoredRuns(args.runs) as runs:
        found = runs.outcomes(args.loop)
    if not found:
        raise UsageError(f"no finished runs{' of loop ' + repr(args.loop) if args.loop else ''} in {args.runs}")
    machine = load_definition(machine_of(args.machine, found[0][0]))
    stats, count = edge_stats(machine, found)
    graph = many_runs_digraph(machine, stats, count)
    fmt = format_for(args.output, args.format)
    if args.output is None:
        if fmt != "dot":
            raise UsageError(f"{fmt}: give -o PATH to write it to a file")
        sys.stdout.write(graph.source)
        return 0
    written = _drawn(lambda: write_atomically(Path(args.output), graph.source if fmt in ("dot", "gv")
                                              else image_of(graph.source, fmt)))
    if written is None:
        return 1
    print(f"wrote {written}: {count} runs")
    return 0


def _drawn(draw: Callable[[], Any]) -> Any:
    """What `draw` returns, or None after saying in one line that Graphviz is missing."""
    from forge.diagram import GraphvizNotInstalled

    try:
        return draw()
    except GraphvizNotInstalled as error:
        print(f"forge: error: {one_line(str(error))}", file=sys.stderr)
        return None


def diagrams_command(commands: Any) -> None:
    gallery = commands.add_parser("diagrams", help="regenerate diagrams/ from machines/ (or --check it)")
    gallery.add_argument("--check", action="store_true", help="only report stale diagrams; exit 1 if any")
    gallery.add_argument("--machines", default="machines", help="definitions folder (default: machines)")
    gallery.add_argument("--out", default="diagrams", help="output folder (default: diagrams)")
    gallery.set_defaults(handler=_diagrams)


def _diagrams(args: argparse.Namespace) -> int:
    from forge.diagram.gallery import refresh_gallery, stale_diagrams

    if args.check:
        stale = stale_diagrams(args.machines, args.out)
        for problem in stale:
            print(f"stale: {problem}", file=sys.stderr)
        if stale:
            print("forge: run `forge diagrams` to regenerate them", file=sys.stderr)
            return 1
        print(f"{args.out}/ is up to date with {args.machines}/")
        return 0
    written = _drawn(lambda: refresh_gallery(args.machines, args.out))
    if written is None:
        return 1
    for path in written:
        print(f"wrote {path}")
    return 0
