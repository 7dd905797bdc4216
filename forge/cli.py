"""The `forge` command: a thin face over the library. Each subcommand calls a function users
could call from Python; errors users can fix print one line, never a traceback."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from forge.errors import ForgeError, UsageError

if TYPE_CHECKING:
    from forge.machine.trace import TransitionRecord

__all__ = ["main"]

# Each command imports what it needs when it runs, so `forge diagram` does not load the
# checker, the demo or the debugger. What forge refuses on purpose is a ForgeError, told in
# one line; anything else is a bug, and keeps its traceback for the report.
_USER_ERRORS = (ForgeError, OSError)
_SCENARIOS = ("index", "ambiguous", "forbidden", "unreachable", "gap", "mcp")  # forge.demo.scenarios.SCENARIOS
_FORMATS = ("svg", "png", "pdf", "dot", "mermaid")  # forge.diagram.FORMATS


def _machine_of(given: str | None, trace: Sequence[TransitionRecord] | None) -> str:
    """The definition to use: the one given, else the one the trace names, else the default."""
    return given or next((r.machine for r in trace or () if r.machine), "single_agent")


def _diagram(args: argparse.Namespace) -> int:
    from forge.diagram import diagram_text, format_for, render
    from forge.machine.trace import read_trace

    trace = read_trace(args.trace) if args.trace else None
    machine = _machine_of(args.machine, trace)
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


def _drawn(draw: Callable[[], Any]) -> Any:
    """What `draw` returns, or None after saying in one line that Graphviz is missing."""
    from forge.diagram import GraphvizNotInstalled

    try:
        return draw()
    except GraphvizNotInstalled as error:
        print(f"forge: error: {error}", file=sys.stderr)
        return None


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


def _check(args: argparse.Namespace) -> int:
    from forge.check import check_definitions, default_definitions
    from forge.machine.catalog import Stage, import_stages

    paths = args.definitions or default_definitions()
    if not paths:
        raise FileNotFoundError("no definitions to check: name files, or run where machines/*.toml exist")
    stages: dict[str, Stage] = {}
    for reference in args.stages:
        stages.update(import_stages(reference))
    def progress(path: str, explored: int) -> None:
        print(f"{path}: {explored:,} abstract states explored so far…", file=sys.stderr, flush=True)

    reports = check_definitions(paths, args.max_steps, args.repeat_limit, stages, progress)
    for report in reports:
        print("\n".join(report.lines()))
    return 0 if all(report.ok for report in reports) else 1


EXIT_CODES = {"success": 0, "failure": 1, "needs_input": 3}
"""How `forge run` and `forge demo` exit: by the outcome of the run's terminal state (2 is
argparse's, for a command line it cannot read; 1 also for an error before the run)."""


def exit_code(outcome: str | None) -> int:
    return EXIT_CODES.get(outcome or "failure", 1)


def _run(args: argparse.Namespace) -> int:
    from forge.machine.trace import write_trace
    from forge.narrate import describe
    from forge.scenario import load_scenario

    scenario = load_scenario(args.scenario)
    try:
        result = scenario.loop.run(scenario.goal, on_transition=lambda record: print(describe(record), flush=True))
    finally:
        scenario.close()
    trace = write_trace(result.trace, args.trace)
    print(f"\nstopped: {result.summary}")
    print(f"trace: {trace}")
    return exit_code(result.outcome)


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
        from forge.llm import ChatPolicy

        policy = ChatPolicy(args.model or os.environ.get("OPENAI_MODEL") or "gpt-4o-mini", system=LLM_SYSTEM)
    report = run_demo(args.workspace, args.scenario, policy=policy)
    return exit_code(report.result.outcome)


def _debug(args: argparse.Namespace) -> int:
    from forge.debug.repl import DebugShell
    from forge.scenario import load_scenario

    scenario = load_scenario(args.scenario)
    try:
        DebugShell(scenario.loop.debug(scenario.goal)).cmdloop()
    finally:
        scenario.close()
    return 0


def _replay(args: argparse.Namespace) -> int:
    from forge.debug.repl import DebugShell
    from forge.debug.replay import ReplaySession
    from forge.machine.loader import load_definition
    from forge.machine.trace import read_trace

    records = read_trace(args.trace)
    DebugShell(ReplaySession(load_definition(_machine_of(args.machine, records)), records)).cmdloop()
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from forge.inspect import write
    from forge.machine.trace import read_trace

    records = read_trace(args.trace)
    written = write(records, args.output, _machine_of(args.machine, records))
    print(f"wrote {written} ({written.stat().st_size:,} bytes, {len(records)} transitions): open it in a browser")
    return 0


def _tools(args: argparse.Namespace) -> int:
    from forge.mcp import MCPError, MCPServer

    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if bool(command) == bool(args.url):
        raise UsageError("name one MCP server: forge tools -- COMMAND ARGS..., or forge tools --url URL")
    server = MCPServer.http(args.url) if args.url else MCPServer.stdio(command[0], *command[1:])
    try:
        with server:
            tools = server.tools()
    except MCPError as error:
        print(f"forge: error: {error}", file=sys.stderr)
        return 1
    print(f"{server.name}: {len(tools)} tool{'s' if len(tools) != 1 else ''}")
    for tool in tools:
        print(tool.summary())
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="forge", description="An agent's tool loop as an explicit state machine.")
    parser.add_argument("--version", action="version", version=f"forge {_installed_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="run a scenario file to its end; exit 0 success, 1 failure, 3 needs input")
    run.add_argument("scenario", metavar="SCENARIO",
                     help="a .py file or module defining `loop` and `goal`, or a demo scenario name")
    run.add_argument("--trace", default="run.jsonl", metavar="PATH", help="where to write the trace (default: run.jsonl)")
    run.set_defaults(handler=_run)

    demo = commands.add_parser("demo", help="run a real agent on a real goal, with a trace and a diagram")
    demo.add_argument("--workspace", metavar="DIR", help="folder to work in (default: a new temporary folder)")
    demo.add_argument("--scenario", choices=_SCENARIOS, default="index", help="which run to show (default: index)")
    demo.add_argument("--llm", action="store_true",
                      help="let a chat model plan (OPENAI_BASE_URL and OPENAI_API_KEY name the endpoint)")
    demo.add_argument("--model", help="the model's name with --llm (default: OPENAI_MODEL, else gpt-4o-mini)")
    demo.set_defaults(handler=_demo)

    diagram = commands.add_parser("diagram", help="draw a loop definition, optionally with a run overlaid")
    diagram.add_argument("machine", nargs="?", metavar="MACHINE",
                         help="built-in name or definition file (default: single_agent, or the trace's machine)")
    diagram.add_argument("-o", "--output", metavar="PATH", help="file to write; without it DOT/Mermaid go to stdout")
    diagram.add_argument("--format", choices=_FORMATS, help="default: from PATH's suffix, else dot")
    diagram.add_argument("--trace", metavar="RUN.jsonl", help="overlay this recorded run")
    diagram.set_defaults(handler=_diagram)

    gallery = commands.add_parser("diagrams", help="regenerate diagrams/ from machines/ (or --check it)")
    gallery.add_argument("--check", action="store_true", help="only report stale diagrams; exit 1 if any")
    gallery.add_argument("--machines", default="machines", help="definitions folder (default: machines)")
    gallery.add_argument("--out", default="diagrams", help="output folder (default: diagrams)")
    gallery.set_defaults(handler=_diagrams)

    debug = commands.add_parser("debug", help="step through a scenario's run, transition by transition")
    debug.add_argument("scenario", metavar="SCENARIO",
                       help="a .py file or module defining `loop` and `goal`, or a demo scenario name")
    debug.set_defaults(handler=_debug)

    replay = commands.add_parser("replay", help="step forwards and backwards through a recorded trace")
    replay.add_argument("trace", metavar="RUN.jsonl")
    replay.add_argument("--machine", help="definition the trace ran on (default: the one it names)")
    replay.set_defaults(handler=_replay)

    inspect = commands.add_parser("inspect", help="write a self-contained HTML page that replays a recorded run")
    inspect.add_argument("trace", metavar="RUN.jsonl")
    inspect.add_argument("-o", "--output", required=True, metavar="PAGE.html", help="where to write the page")
    inspect.add_argument("--machine", help="definition the trace ran on (default: the one it names)")
    inspect.set_defaults(handler=_inspect)

    check = commands.add_parser("check", help="prove loop definitions sound before they run")
    check.add_argument("definitions", nargs="*", metavar="DEFINITION",
                       help="files or built-in names (default: every machines/*.toml)")
    check.add_argument("--max-steps", type=_positive, default=8, help="the loop's max_steps (default 8)")
    check.add_argument("--repeat-limit", type=_positive, default=3, help="the loop's repeat_limit (default 3)")
    check.add_argument("--stages", action="append", default=[], metavar="MODULE:NAME",
                       help="user stages the definitions name: a mapping of Stage objects (repeatable)")
    check.set_defaults(handler=_check)

    tools = commands.add_parser("tools", help="list an MCP server's tools as forge sees them",
                                usage="forge tools [--url URL] [-- COMMAND ARGS...]")
    tools.add_argument("--url", help="a streamable-HTTP MCP server's URL, instead of a command")
    tools.add_argument("command", nargs=argparse.REMAINDER, help="the stdio MCP server to start, after --")
    tools.set_defaults(handler=_tools)
    return parser


def _installed_version() -> str:
    import forge

    return str(forge.__version__)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except _USER_ERRORS as error:
        print(f"forge: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
