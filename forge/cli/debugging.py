"""The commands that look at a run transition by transition: `forge debug`, `forge replay`,
`forge diff` and `forge inspect` (recorded runs, or durable runs in a database)."""

from __future__ import annotations

import argparse
from typing import Any

from forge.cli.arguments import positive
from forge.cli.references import machine_of, stored_records
from forge.errors import UsageError

__all__ = ["debug_command", "diff_command", "inspect_command", "replay_command"]


def debug_command(commands: Any) -> None:
    debug = commands.add_parser("debug", help="step through a scenario's run, transition by transition")
    debug.add_argument("scenario", metavar="SCENARIO",
                       help="a .py file or module defining `loop` and `goal`, a demo scenario name, a recorded run "
                            "(RUN.jsonl, written with its journal), or with --db a RUN_ID")
    debug.add_argument("--db", help="open the stored durable run SCENARIO from this database (nothing runs again)")
    debug.add_argument("--turn", type=positive, help="with --db, a run stored by an earlier forge: only this turn of it")
    debug.add_argument("--machine", help="with --db: definition the run ran on (default: the one its trace names)")
    debug.add_argument("--at", type=positive, metavar="K",
                       help="with RUN.jsonl: open the recorded run positioned just before transition K")
    debug.add_argument("--scenario", dest="with_scenario", metavar="FILE",
                       help="with RUN.jsonl: the scenario that made the run, so that `fork` can go on live")
    debug.set_defaults(handler=_debug)


def _debug(args: argparse.Namespace) -> int:
    from forge.debug.repl import DebugShell
    from forge.scenario import load_scenario

    if args.db:  # a stored run: stepped through as recorded, never executed again
        return _replay_stored(args.scenario, args.db, args.turn, args.machine)
    if args.scenario.endswith(".jsonl"):
        return _debug_recorded(args.scenario, args.at, args.with_scenario, args.machine)
    if args.at is not None or args.with_scenario:
        raise UsageError("--at and --scenario open a recorded run: forge debug RUN.jsonl --at K [--scenario FILE]")
    scenario = load_scenario(args.scenario)
    try:
        DebugShell(scenario.loop.debug(scenario.goal)).cmdloop()
    finally:
        scenario.close()
    return 0


def _debug_recorded(path: str, at: int | None, scenario_file: str | None, machine: str | None) -> int:
    """A recorded run, positioned just before transition `at`: replayed as recorded, or,
    with the scenario that made it, on its loop (stepping replays until the recording
    departs or ends, and `fork` goes live)."""
    from forge.debug.repl import DebugShell
    from forge.debug.replay import ReplaySession
    from forge.debug.stepper import Stepper
    from forge.machine.loader import load_definition
    from forge.records.trace import read_trace
    from forge.scenario import load_scenario

    records = read_trace(path)
    if at is not None and not 1 <= at <= len(records):
        raise UsageError(f"{path} has transitions 1 to {len(records)}, not {at}")
    if scenario_file is None:
        session: Stepper = ReplaySession(load_definition(machine_of(machine, records)), records)
        for _ in range((at or 1) - 1):
            session.step()
        DebugShell(session).cmdloop()
        return 0
    scenario = load_scenario(scenario_file)
    try:
        live = scenario.loop.debug_fork(path)
        for _ in range((at or 1) - 1):
            live.step()
        DebugShell(live).cmdloop()
    finally:
        scenario.close()
    return 0


def replay_command(commands: Any) -> None:
    replay = commands.add_parser("replay", help="step forwards and backwards through a recorded trace")
    replay.add_argument("trace", metavar="RUN.jsonl|RUN_ID")
    replay.add_argument("--machine", help="definition the trace ran on (default: the one it names)")
    replay.add_argument("--db", help="replay the stored durable run RUN_ID from this database")
    replay.add_argument("--turn", type=positive, help="with --db, a run stored by an earlier forge: only this turn of it")
    replay.set_defaults(handler=_replay)


def _replay(args: argparse.Namespace) -> int:
    from forge.debug.repl import DebugShell
    from forge.debug.replay import ReplaySession
    from forge.machine.loader import load_definition
    from forge.records.trace import read_trace

    if args.db:
        return _replay_stored(args.trace, args.db, args.turn, args.machine)
    records = read_trace(args.trace)
    DebugShell(ReplaySession(load_definition(machine_of(args.machine, records)), records)).cmdloop()
    return 0


def _replay_stored(run_id: str, db: str, turn: int | None, machine: str | None) -> int:
    from forge.debug.repl import DebugShell
    from forge.debug.replay import ReplaySession
    from forge.machine.loader import load_definition

    records, said = stored_records(run_id, db, turn)
    print(f"run {run_id} · {said}")
    DebugShell(ReplaySession(load_definition(machine_of(machine, records)), records)).cmdloop()
    return 0


def diff_command(commands: Any) -> None:
    compare = commands.add_parser("diff", help="where two recorded runs diverge; exit 0 equal, 1 different")
    compare.add_argument("a", metavar="A", help="a trace file written with its journal, or a run id with --db")
    compare.add_argument("b", metavar="B")
    compare.add_argument("--db", help="A and B are durable runs in this database")
    compare.set_defaults(handler=_diff, error_code=2)


def _diff(args: argparse.Namespace) -> int:
    from forge.machine.diff import diff

    if args.db:
        from forge.durable.runs import StoredRuns

        with StoredRuns(args.db) as runs:
            a, b = runs.recorded(args.a), runs.recorded(args.b)
    else:
        a, b = args.a, args.b
    found = diff(a, b, names=(args.a, args.b))
    print(found)
    return 0 if found.equal else 1


def inspect_command(commands: Any) -> None:
    inspect = commands.add_parser("inspect", help="write a self-contained HTML page that replays a recorded run")
    inspect.add_argument("trace", metavar="RUN.jsonl|RUN_ID")
    inspect.add_argument("-o", "--output", required=True, metavar="PAGE.html", help="where to write the page")
    inspect.add_argument("--machine", help="definition the trace ran on (default: the one it names)")
    inspect.add_argument("--db", help="RUN.jsonl is the id of a durable run in this database: its page, whole")
    inspect.add_argument("--turn", type=positive, help="with --db, a run stored by an earlier forge: only this turn of it")
    inspect.add_argument("--against", metavar="B.jsonl",
                         help="another run of the same definition: draw both paths, mark where they diverge, "
                              "and align the timelines")
    inspect.set_defaults(handler=_inspect)


def _inspect(args: argparse.Namespace) -> int:
    from forge.inspect import write
    from forge.records.trace import read_trace

    if args.against:
        from forge.inspect.compare import write_comparison

        written = write_comparison(args.trace, args.against, args.output, args.machine,
                                   names=(args.trace, args.against))
        print(f"wrote {written} ({written.stat().st_size:,} bytes): {args.trace} against {args.against}; "
              "open it in a browser")
        return 0
    records = stored_records(args.trace, args.db, args.turn)[0] if args.db else list(read_trace(args.trace))
    written = write(records, args.output, machine_of(args.machine, records))
    print(f"wrote {written} ({written.stat().st_size:,} bytes, {len(records)} transitions): open it in a browser")
    return 0
