"""The `forge` command: a thin face over the library. Each subcommand calls a function users
could call from Python; errors users can fix print one line, never a traceback."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from forge.errors import ForgeError, MissingFile, UsageError
from forge.machine.definition import PROPERTIES

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


def _loop_named(given: str | None, command: str = "forge diagram") -> Any:
    """The loop `MODULE:LOOP` or `PATH.py:LOOP` names (drawn with its children), or None when
    `given` names a definition (a built-in name or a file).

    Raises:
        UsageError: the reference cannot be imported, or names something that is no loop.
    """
    from pathlib import Path

    from forge.diagram.render import is_loop
    from forge.machine.catalog import import_reference

    if not given or ":" not in given or Path(given).exists():
        return None
    loop = import_reference(given, command, "examples/writer.py:writer")
    if not is_loop(loop):
        raise UsageError(f"{command} {given!r}: that is a {type(loop).__name__}, not an AgentLoop")
    return loop


def _diagram(args: argparse.Namespace) -> int:
    from forge.diagram import diagram_text, format_for, render
    from forge.machine.trace import read_trace

    if args.runs:
        return _many_runs(args)
    if args.loop:
        raise UsageError("--loop picks the stored runs of one loop: give it with --runs DB")
    trace = read_trace(args.trace) if args.trace else None
    machine: Any = _loop_named(args.machine) or _machine_of(args.machine, trace)
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
    machine = load_definition(_machine_of(args.machine, found[0][0]))
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


def _stages_of(references: Sequence[str]) -> dict[str, Any]:
    """The user stages `--stages MODULE:NAME` options name, by name."""
    from forge.machine.catalog import import_stages

    stages: dict[str, Any] = {}
    for reference in references:
        stages.update(import_stages(reference))
    return stages


def _check(args: argparse.Namespace) -> int:
    import functools

    from forge.check import check_definitions, check_loop, default_definitions

    paths = args.definitions or default_definitions()
    if not paths:
        raise MissingFile("no definitions to check: name files, or run where machines/*.toml exist")
    stages = _stages_of(args.stages)

    def progress(path: str, explored: int) -> None:
        print(f"{path}: {explored:,} abstract states explored so far…", file=sys.stderr, flush=True)

    side_effects = _side_effects_of(args.tools) if args.tools else None
    reports = []
    for path in paths:  # a definition, or a loop (MODULE:LOOP, PATH.py:LOOP) checked with its own limits and stages
        loop = _loop_named(str(path), "forge check")
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


EXIT_CODES = {"success": 0, "failure": 1, "needs_input": 3}
"""How `forge run` and `forge demo` exit: by the outcome of the run's terminal state (2 is
argparse's, for a command line it cannot read; 1 also for an error before the run)."""


EXITS = "".join((
    "What a command's exit code means, the same for every command:\n\n| code | meaning |\n|------|---------|\n",
    "| 0 | done: the run finished in success (`forge run`, `demo`, `runs follow`), or the command did what it "
    "was asked |\n",
    "| 1 | failed: the run ended in failure, or the command was refused, told in one line on stderr |\n",
    "| 2 | a command line forge cannot read (argparse's); and a refusal of the commands whose 1 means \"no\" (`diff`: "
    "the runs differ; `eval`: a gate failed) or that a script waits on (`submit`, `ui`) |\n",
    "| 3 | needs input: the run waits for a person (`forge run`, `demo`, `runs follow`) |\n\n",
))
"""docs/cli.md's table of exit codes (`EXIT_CODES` for a run's outcome)."""


def exit_code(outcome: str | None) -> int:
    return EXIT_CODES.get(outcome or "failure", 1)


def _run(args: argparse.Namespace) -> int:
    from forge.machine.journal import JournalEncodeError
    from forge.machine.trace import write_trace
    from forge.narrate import describe
    from forge.scenario import load_scenario

    if (args.at is not None or args.patch) and not args.fork:
        raise UsageError("--at and --patch fork a recorded run: forge run SCENARIO --fork RUN.jsonl --at K")
    scenario = load_scenario(args.scenario)
    try:
        if args.fork:
            from forge.observe import TransitionCallback

            shown = TransitionCallback(lambda record: print(describe(record), flush=True))
            result = scenario.loop.fork(args.fork, at=args.at, patch=_patch_of(args.patch) if args.patch else None,
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
    from forge.machine.trace import read_trace
    from forge.scenario import load_scenario

    records = read_trace(path)
    if at is not None and not 1 <= at <= len(records):
        raise UsageError(f"{path} has transitions 1 to {len(records)}, not {at}")
    if scenario_file is None:
        session: Stepper = ReplaySession(load_definition(_machine_of(machine, records)), records)
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


def _replay(args: argparse.Namespace) -> int:
    from forge.debug.repl import DebugShell
    from forge.debug.replay import ReplaySession
    from forge.machine.loader import load_definition
    from forge.machine.trace import read_trace

    if args.db:
        return _replay_stored(args.trace, args.db, args.turn, args.machine)
    records = read_trace(args.trace)
    DebugShell(ReplaySession(load_definition(_machine_of(args.machine, records)), records)).cmdloop()
    return 0


def _replay_stored(run_id: str, db: str, turn: int | None, machine: str | None) -> int:
    from forge.debug.repl import DebugShell
    from forge.debug.replay import ReplaySession
    from forge.machine.loader import load_definition

    records, said = _stored_records(run_id, db, turn)
    print(f"run {run_id} · {said}")
    DebugShell(ReplaySession(load_definition(_machine_of(machine, records)), records)).cmdloop()
    return 0


def _stored_records(run_id: str, db: str, turn: int | None) -> tuple[list[TransitionRecord], str]:
    """A stored durable run's records: the whole run (default), or, for a run stored by an
    earlier forge (one trace per answer), one of its turns; and a line saying which."""
    from forge.durable.runs import StoredRuns

    with StoredRuns(db) as runs:
        stored = runs.get(run_id)
    if not stored.traces:
        raise UsageError(f"run {run_id!r} is {stored.status} and has published no transitions yet (it does when "
                         "it waits or ends)")
    if not stored.legacy:
        if turn not in (None, 1):
            raise UsageError(f"run {run_id!r} is one run, answers and all: --turn is for runs stored by an earlier "
                             "forge (one trace per answer)")
        return stored.records, f"{stored.status} · the whole run: {len(stored.records)} transitions"
    count = len(stored.traces)
    if turn is not None:
        if not 1 <= turn <= count:
            raise UsageError(f"run {run_id!r} has turns 1 to {count}, not {turn}")
        return list(stored.traces[turn - 1]), f"{stored.status} · turn {turn} of {count}"
    renumbered = stored.records
    turns = f"{count} turns" if count != 1 else "1 turn"
    return renumbered, f"{stored.status} · the whole run: {turns}, {len(renumbered)} transitions"


def _answer_of(args: argparse.Namespace) -> Any:
    from forge.durable.answers import read_answer

    given = [(kind, value) for kind, value in (("approve", args.approve), ("reject", args.reject), ("tool", args.tool),
                                                ("add_tool", args.add_tool), ("did_run", args.did_run),
                                                ("text", args.text))
             if value is not None]
    if args.run_again:
        given.append(("run_again", None))
    if len(given) != 1:
        raise UsageError("give exactly one answer: --approve FP, --reject FP, --tool NAME, --add-tool NAME, "
                         "--did-run JSON, --run-again or --text REPLY")
    kind, value = given[0]
    if args.arguments is not None and kind != "approve":
        raise UsageError("--arguments edits an approval: give it with --approve FP")
    return read_answer(kind, value, args.arguments, as_text=True,
                       names={"value": "--did-run (the call's result)", "arguments": "--arguments (the edited call's "
                              "arguments as a JSON object)"})


def _runs(args: argparse.Namespace) -> int:
    """`forge runs VERB`: one function per verb, each given the stored runs."""
    from forge.durable.runs import StoredRuns

    verbs: dict[str, Callable[[Any, argparse.Namespace], int]] = {
        "list": _runs_list, "show": _runs_show, "fork": _runs_fork, "cancel": _runs_cancel,
        "follow": lambda runs, given: _follow(runs, given.run_id, given.every, given.db), "resume": _runs_resume}
    with StoredRuns(args.db) as runs:
        return verbs[args.action](runs, args)


def _runs_list(runs: Any, args: argparse.Namespace) -> int:
    from datetime import datetime

    rows = runs.find(status=args.status, limit=args.limit)[0] if args.status else runs.list(args.limit)
    if not rows:
        print(f"no {args.status + ' ' if args.status else ''}runs in {runs.url}")
    for row in rows:
        when = datetime.fromtimestamp(row.created_at).isoformat(" ", "seconds") if row.created_at else "?"
        print(f"{row.run_id:<34} {row.status:<10} {when}  {row.loop}: {row.goal}")
    return 0


def _runs_show(runs: Any, args: argparse.Namespace) -> int:
    from forge.narrate import describe

    stored = runs.get(args.run_id)
    print(f"run {stored.run_id} · {stored.loop} · {stored.status}" +
          (f" · {stored.reason} ({stored.outcome})" if stored.reason else ""))
    print(f"goal: {stored.goal}")
    if stored.forked_from is not None:
        print(f"forked from {stored.forked_from.run_id} at transition {stored.forked_from.transition}" +
              (f", patched: {stored.forked_from.patch}" if stored.forked_from.patch else ""))
    if stored.continues:
        print(f"continues the conversation of run {stored.continues}")
    for number, trace in enumerate(stored.traces, start=1):
        if stored.legacy:
            print(f"turn {number}:")
        for record in trace:
            print(describe(record))
    if stored.answer_text is not None:
        print(f"answer: {stored.answer_text}")
    if stored.waiting is not None:
        _print_waiting(stored.waiting, args.run_id, args.db)
    if stored.error:
        print(f"error: {stored.error}")
    return 0


def _runs_fork(runs: Any, args: argparse.Namespace) -> int:
    if args.at is None:
        raise UsageError("forge runs fork needs --at K: the transition to fork at")
    patch = _patch_of(args.patch) if args.patch else None
    new = runs.fork(args.run_id, args.at, patch, args.run_id_new)
    loop = runs.get(args.run_id).loop
    print(f"forked {args.run_id} at transition {args.at} into {new}: queued for a worker serving loop {loop!r} "
          f"(forge worker --db {args.db} --loops MODULE)")
    return 0


def _runs_cancel(runs: Any, args: argparse.Namespace) -> int:
    runs.cancel(args.run_id)
    print(f"cancelled {args.run_id}")
    return 0


def _runs_resume(runs: Any, args: argparse.Namespace) -> int:
    answered = runs.get(args.run_id).answers
    runs.resume(args.run_id, _answer_of(args))
    print(f"answered {args.run_id}")
    server = runs.who_serves(args.run_id)
    hint = ("" if server is not None else
            f"no forge worker is live, so the run goes on only in the program that started it, if it is still "
            f"running: start a worker (forge worker --db {args.db} --loops MODULE, where MODULE makes the "
            f"durable loop named {runs.get(args.run_id).loop!r}) or that program again")
    if hint:
        print(f"note: {hint}")
    if args.wait:
        try:
            stored = runs.wait(args.run_id, args.wait, answers=answered + 1)
        except TimeoutError:
            print(f"still {runs.get(args.run_id).status} after {args.wait:g} s" + (f": {hint}" if hint else ""))
            return 1
        print(f"{stored.status}" + (f": {stored.summary}" if stored.summary else ""))
    return 0


def _print_waiting(waiting: Any, run_id: str, db: str | None) -> None:
    """What a waiting run waits for, and the commands that answer it."""
    print(f"waiting in {waiting.state}: {waiting.asks}", flush=True)
    for command in waiting.commands(run_id, db):
        print(f"  answer: {command}", flush=True)


def _follow(runs: Any, run_id: str, every: float, db: str | None = None) -> int:
    """`forge runs follow`: each transition of the run as it fires (and each tool attempt and
    model call, with what the model said, indented before the transition it is made in),
    until it waits or ends. Exits as `forge run` does: 0 when it finished in success, 3 when
    it waits (needs input), 1 otherwise."""
    from forge.events import ModelCallStarted, RunStopped, TextDelta, ToolAttemptFinished, TransitionFired, WaitingOn
    from forge.machine.trace import error_text

    if not every > 0:
        raise UsageError(f"--every must be a number of seconds > 0, got {every:g}")
    from forge.narrate import describe

    for event in runs.stream(run_id, every):
        if isinstance(event, TransitionFired):
            print(describe(event.record), flush=True)
        elif isinstance(event, ToolAttemptFinished):
            attempt = event.attempt
            outcome = "returned" if attempt.error is None else f"raised {error_text(attempt.error)}"
            print(f"  {attempt.tool} attempt {attempt.number} {outcome}", flush=True)
        elif isinstance(event, ModelCallStarted):
            print(f"  asked model {event.model}", flush=True)
        elif isinstance(event, TextDelta):
            print(f"  the model says: {event.text}", flush=True)
        elif isinstance(event, WaitingOn):
            _print_waiting(event.waiting, run_id, db)
        elif isinstance(event, RunStopped):
            stored = event.result
            print(f"{stored.status}" + (f": {stored.summary}" if stored.summary and stored.status == "finished" else "")
                  + (f": {stored.error}" if stored.error else ""), flush=True)
            if stored.status == "waiting":
                return EXIT_CODES["needs_input"]
            return exit_code(stored.outcome) if stored.status == "finished" else 1
    return 1


def _patch_of(path: str) -> Any:
    import json
    from pathlib import Path

    from forge.machine.fork import Patch

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise UsageError(f"{path} is not JSON: {error.msg} at line {error.lineno}") from None
    return Patch.from_json(data)


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


def _cover(args: argparse.Namespace) -> int:
    from pathlib import Path

    from forge.cover import cover
    from forge.machine.loader import load_definition

    definition = load_definition(args.definition, _stages_of(args.stages))
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


def _submit(args: argparse.Namespace) -> int:
    from forge.durable.runs import StoredRuns

    with StoredRuns(args.db, create=True) as runs:
        run_id = runs.submit(args.loop, args.goal, args.run_id)
    print(run_id)
    return 0


def _worker(args: argparse.Namespace) -> int:
    from forge.durable.database import database_url, shown_url
    from forge.durable.host import executor_name
    from forge.durable.worker import work
    from forge.durable.workflow import LOOPS
    from forge.scenario import import_target

    if args.dead_after <= args.heartbeat:
        raise UsageError(f"--dead-after ({args.dead_after:g} s) must be more than --heartbeat ({args.heartbeat:g} s): "
                         "a peer is silent only once it has missed a beat")
    _worker_log()
    for target in args.loops:
        import_target(target)  # attaches the durable loops the runs name
    me = executor_name()
    serving = (f"forge worker {me}: serving loops {', '.join(sorted(LOOPS)) or '(none)'} from "
               f"{shown_url(database_url(args.db))}, {args.concurrency} runs at once; Ctrl-C or SIGTERM stops it "
               "and hands its runs back")
    from forge.durable.database import OUTAGE_LIMIT, DatabaseAway

    try:
        left = work(args.db, args.concurrency, executor_id=me, grace=args.grace, beat_every=args.heartbeat,
                    dead_after=args.dead_after, started=lambda: print(serving, flush=True))
    except DatabaseAway as away:
        print(f"forge worker {me}: stopped: {away} (a worker rides out {OUTAGE_LIMIT:g} s of it); its runs go to "
              f"the other workers once it has been silent for {args.dead_after:g} s, or to it when it starts again",
              file=sys.stderr, flush=True)
        return 1
    handed = f": {', '.join(left[:10])}{' …' if len(left) > 10 else ''}" if left else ""
    print(f"forge worker {me}: stopped; handed back {len(left)} run{'s' if len(left) != 1 else ''} "
          f"to the other workers{handed}", flush=True)
    return 0


def _worker_log() -> None:
    """A worker says what it does on standard error, a line each, with the time: its stop,
    each run it hands back, each silent peer whose runs it recovers, each outage of the
    database (forge.durable's log, from INFO on; DBOS's own stays at WARNING)."""
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%Y-%m-%d %H:%M:%S"))
    log = logging.getLogger("forge.durable")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


def _inspect(args: argparse.Namespace) -> int:
    from forge.inspect import write
    from forge.machine.trace import read_trace

    if args.against:
        from forge.inspect.compare import write_comparison

        written = write_comparison(args.trace, args.against, args.output, args.machine,
                                   names=(args.trace, args.against))
        print(f"wrote {written} ({written.stat().st_size:,} bytes): {args.trace} against {args.against}; "
              "open it in a browser")
        return 0
    records = _stored_records(args.trace, args.db, args.turn)[0] if args.db else list(read_trace(args.trace))
    written = write(records, args.output, _machine_of(args.machine, records))
    print(f"wrote {written} ({written.stat().st_size:,} bytes, {len(records)} transitions): open it in a browser")
    return 0


def _eval(args: argparse.Namespace) -> int:
    try:
        from forge.evals.command import EvalCommand
    except ImportError as missing:
        raise UsageError(f"forge eval needs the evals extra: pip install 'forge-fsm[evals]' ({missing})") from None
    return EvalCommand(args.dataset, args.loop, args.cassettes, args.record, args.offline, args.max_concurrency,
                       args.out, args.against, args.min_score, args.no_regressions, tuple(args.scorers))()


def _serve(args: argparse.Namespace) -> int:
    from forge.machine.catalog import import_reference

    if args.a2a or args.ag_ui:
        return _serve_protocol(args)
    try:
        from forge.serve import serve_http, serve_stdio, served_durables, served_tools
    except ImportError as missing:
        raise UsageError(f"forge serve needs the mcp extra: pip install 'forge-fsm[mcp]' ({missing})") from None
    named = {reference.rpartition(":")[2]: import_reference(reference, "forge serve", "examples/writer.py:writer")
             for reference in args.loops}
    tools, durables = served_tools(named), served_durables(named)
    if args.http:
        print(f"forge serve: {', '.join(t.name for t in tools)} at http://{args.host}:{args.port}/mcp", flush=True)
        serve_http(tools, args.host, args.port, args.name, durables)
        return 0
    import anyio

    anyio.run(serve_stdio, tools, args.name, durables)
    return 0


def _serve_protocol(args: argparse.Namespace) -> int:
    """`forge serve --a2a` / `--ag-ui`: one loop (an AgentLoop, or a durable one for the
    workers) as an A2A agent or an AG-UI backend at http://HOST:PORT/."""
    from forge.machine.catalog import import_reference

    if args.a2a and args.ag_ui:
        raise UsageError("forge serve speaks one protocol at a time: --a2a or --ag-ui, not both")
    if args.http:
        raise UsageError("--http serves MCP; --a2a and --ag-ui serve over HTTP already: leave --http out")
    if len(args.loops) != 1:
        raise UsageError(f"forge serve --{'a2a' if args.a2a else 'ag-ui'} serves one loop, got {len(args.loops)}")
    loop = import_reference(args.loops[0], "forge serve", "examples/writer.py:writer")
    if not hasattr(getattr(loop, "loop", loop), "definition"):
        raise UsageError(f"{args.loops[0]} is not an AgentLoop (nor a durable one): forge serve --a2a and --ag-ui "
                         "serve a loop")
    import uvicorn

    url = f"http://{args.host}:{args.port}/"
    if args.a2a:
        from forge.protocols.a2a import a2a_app

        app, said = a2a_app(loop, url, name=None), f"over A2A at {url} (its card: {url}.well-known/agent-card.json)"
    else:
        from forge.protocols.ag_ui import ag_ui_app

        app, said = ag_ui_app(loop), f"over AG-UI at {url} (POST a RunAgentInput)"
    print(f"forge serve: {args.loops[0]} {said}", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


def _ui(args: argparse.Namespace) -> int:
    from forge.ui import serve

    serve(args.db, host=args.host, port=args.port, read_only=args.read_only,
          say=lambda line: print(line, flush=True))
    return 0


def _tools(args: argparse.Namespace) -> int:
    from forge.mcp import MCPError, MCPServer

    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if bool(command) == bool(args.url):
        raise UsageError("name one MCP server: forge tools -- COMMAND ARGS..., or forge tools --url URL")
    server = MCPServer.http(args.url) if args.url else MCPServer.stdio(command[0], *command[1:])
    shown: list[str] = []
    try:
        with server:
            for listed in server.listing:  # one by one: a tool forge cannot use is listed, flagged
                try:
                    shown.extend(tool.summary() for tool in server.tools(include=[listed.name]))
                except UsageError as refused:
                    why = str(refused).split(": ", 1)[-1].split("; leave that tool out", 1)[0]
                    shown.append(f"{listed.name} — INVALID SCHEMA, forge cannot call it: {why}")
    except MCPError as error:
        print(f"forge: error: {one_line(str(error))}", file=sys.stderr)
        return 1
    print(f"{server.name}: {len(shown)} tool{'s' if len(shown) != 1 else ''}")
    for line in shown:
        print(line)
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse's parser, telling a command line it cannot read in one line (the usage is
    one `--help` away) and exiting 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _parser() -> argparse.ArgumentParser:
    """forge's command line: one function adds each command (`COMMANDS`), with its own flags."""
    parser = _Parser(prog="forge", description="An agent's tool loop as an explicit state machine.")
    parser.add_argument("--version", action="version", version=f"forge {_installed_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    for add in COMMANDS:
        add(commands)
    return parser


def _run_command(commands: Any) -> None:
    run = commands.add_parser("run", help="run a scenario file to its end; exit 0 success, 1 failure, 3 needs input")
    run.add_argument("scenario", metavar="SCENARIO",
                     help="a .py file or module defining `loop` and `goal`, or a demo scenario name")
    run.add_argument("--trace", default="run.jsonl", metavar="PATH", help="where to write the trace (default: run.jsonl)")
    run.add_argument("--fork", metavar="RUN.jsonl",
                     help="fork this recorded run instead: replay it up to --at K, then go on live")
    run.add_argument("--at", type=_positive, metavar="K",
                     help="with --fork: the transition to go live at (default: where the scenario first departs "
                          "from the recording)")
    run.add_argument("--patch", metavar="FILE.json", help="with --fork: the outcome to put in place of the one at K")
    run.set_defaults(handler=_run)


def _demo_command(commands: Any) -> None:
    demo = commands.add_parser("demo", help="run a real agent on a real goal, with a trace and a diagram")
    demo.add_argument("--workspace", metavar="DIR", help="folder to work in (default: a new temporary folder)")
    demo.add_argument("--scenario", choices=_SCENARIOS, default="index", help="which run to show (default: index)")
    demo.add_argument("--llm", action="store_true",
                      help="let a chat model plan (OPENAI_BASE_URL and OPENAI_API_KEY name the endpoint)")
    demo.add_argument("--model", help="the model's name with --llm (default: OPENAI_MODEL, else gpt-4o-mini)")
    demo.set_defaults(handler=_demo)


def _examples_command(commands: Any) -> None:
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


def _diagram_command(commands: Any) -> None:
    diagram = commands.add_parser("diagram", help="draw a loop definition, optionally with a run overlaid")
    diagram.add_argument("machine", nargs="?", metavar="MACHINE",
                         help="built-in name or definition file (default: single_agent, or the trace's machine), "
                              "or MODULE:LOOP (or PATH.py:LOOP), an AgentLoop, drawn with the loops it calls")
    diagram.add_argument("-o", "--output", metavar="PATH", help="file to write; without it DOT/Mermaid go to stdout")
    diagram.add_argument("--format", choices=_FORMATS, help="default: from PATH's suffix, else dot")
    diagram.add_argument("--trace", metavar="RUN.jsonl", help="overlay this recorded run")
    diagram.add_argument("--runs", metavar="DB", help="draw many stored runs on it: per edge, runs, p50, p95, failed")
    diagram.add_argument("--loop", metavar="NAME", help="with --runs: only the runs of this durable loop")
    diagram.set_defaults(handler=_diagram)


def _diagrams_command(commands: Any) -> None:
    gallery = commands.add_parser("diagrams", help="regenerate diagrams/ from machines/ (or --check it)")
    gallery.add_argument("--check", action="store_true", help="only report stale diagrams; exit 1 if any")
    gallery.add_argument("--machines", default="machines", help="definitions folder (default: machines)")
    gallery.add_argument("--out", default="diagrams", help="output folder (default: diagrams)")
    gallery.set_defaults(handler=_diagrams)


def _debug_command(commands: Any) -> None:
    debug = commands.add_parser("debug", help="step through a scenario's run, transition by transition")
    debug.add_argument("scenario", metavar="SCENARIO",
                       help="a .py file or module defining `loop` and `goal`, a demo scenario name, a recorded run "
                            "(RUN.jsonl, written with its journal), or with --db a RUN_ID")
    debug.add_argument("--db", help="open the stored durable run SCENARIO from this database (nothing runs again)")
    debug.add_argument("--turn", type=_positive, help="with --db, a run stored by an earlier forge: only this turn of it")
    debug.add_argument("--machine", help="with --db: definition the run ran on (default: the one its trace names)")
    debug.add_argument("--at", type=_positive, metavar="K",
                       help="with RUN.jsonl: open the recorded run positioned just before transition K")
    debug.add_argument("--scenario", dest="with_scenario", metavar="FILE",
                       help="with RUN.jsonl: the scenario that made the run, so that `fork` can go on live")
    debug.set_defaults(handler=_debug)


def _replay_command(commands: Any) -> None:
    replay = commands.add_parser("replay", help="step forwards and backwards through a recorded trace")
    replay.add_argument("trace", metavar="RUN.jsonl|RUN_ID")
    replay.add_argument("--machine", help="definition the trace ran on (default: the one it names)")
    replay.add_argument("--db", help="replay the stored durable run RUN_ID from this database")
    replay.add_argument("--turn", type=_positive, help="with --db, a run stored by an earlier forge: only this turn of it")
    replay.set_defaults(handler=_replay)


def _runs_command(commands: Any) -> None:
    runs = commands.add_parser("runs", help="list, show, follow, answer, cancel or fork durable runs in a database")
    verbs = runs.add_subparsers(dest="action", required=True, parser_class=_Parser)

    def verb(name: str, help: str, run_id: bool = True) -> argparse.ArgumentParser:
        made: argparse.ArgumentParser = verbs.add_parser(name, help=help)
        if run_id:
            made.add_argument("run_id", metavar="RUN_ID")
        made.add_argument("--db", required=True, help="the runs' database: a SQLite path or a postgresql:// URL")
        made.set_defaults(handler=_runs)
        return made

    listing = verb("list", "the newest runs, or those in one status", run_id=False)
    listing.add_argument("--limit", type=_positive, default=50, help="how many runs, newest first (default 50)")
    listing.add_argument("--status", choices=RUN_STATUSES,
                         help="only the runs in this status (queued, running, waiting, finished, cancelled, error)")
    verb("show", "a run's transitions, answer, question or error")
    following = verb("follow", "each transition of a run as it fires, until it waits or ends; exit as forge run")
    following.add_argument("--every", type=float, default=0.25, metavar="SECONDS",
                           help="how often to ask the database (default 0.25)")
    resume = verb("resume", "answer what a waiting run asks (exactly one answer)")
    resume.add_argument("--approve", metavar="FINGERPRINT", help="approve the waiting call")
    resume.add_argument("--reject", metavar="FINGERPRINT", help="reject the waiting call (the policy replans)")
    resume.add_argument("--tool", metavar="NAME", help="run the waiting call with this tool")
    resume.add_argument("--add-tool", metavar="NAME", help="add this extra tool of the loop to the run")
    resume.add_argument("--did-run", metavar="JSON", help="the call in doubt ran, and returned JSON")
    resume.add_argument("--run-again", action="store_true", help="call the call in doubt again")
    resume.add_argument("--text", metavar="REPLY", help="the user's reply to the policy's question")
    resume.add_argument("--arguments", metavar="JSON",
                        help="with --approve: approve the call with these arguments instead (checked first)")
    resume.add_argument("--wait", type=float, metavar="SECONDS", help="wait this long for what the run does next")
    verb("cancel", "cancel a run: it stops where it is, and a waiting one waits no more")
    fork = verb("fork", "a new run, the same as this one up to --at K, then live; queued for a worker")
    fork.add_argument("--at", type=_positive, metavar="K", help="the transition to fork at")
    fork.add_argument("--patch", metavar="FILE.json", help="the outcome to put in place of the one recorded at K")
    fork.add_argument("--run-id", dest="run_id_new", metavar="NEW", help="the new run's id (default: random)")


def _diff_command(commands: Any) -> None:
    compare = commands.add_parser("diff", help="where two recorded runs diverge; exit 0 equal, 1 different")
    compare.add_argument("a", metavar="A", help="a trace file written with its journal, or a run id with --db")
    compare.add_argument("b", metavar="B")
    compare.add_argument("--db", help="A and B are durable runs in this database")
    compare.set_defaults(handler=_diff, error_code=2)


def _cover_command(commands: Any) -> None:
    coverage = commands.add_parser("cover", help="which transitions of a definition recorded runs took, and which never")
    coverage.add_argument("definition", metavar="DEFINITION", help="a built-in name (single_agent) or a TOML path")
    coverage.add_argument("traces", nargs="+", metavar="TRACES",
                          help="trace files, cassettes, or folders of them (searched for *.jsonl)")
    coverage.add_argument("--generate", metavar="DIR",
                          help="write a pytest test to DIR for each transition never taken that can be forced")
    coverage.add_argument("--stages", action="append", default=[], metavar="MODULE:NAME",
                          help="user stages the definition names (as forge check takes them)")
    coverage.set_defaults(handler=_cover)


def _submit_command(commands: Any) -> None:
    submit = commands.add_parser("submit", help="queue a durable run for the workers")
    submit.add_argument("goal", metavar="GOAL")
    submit.add_argument("--loop", required=True, help="the durable loop's name, as the workers attach it (loop.durable(NAME))")
    submit.add_argument("--db", required=True, help="the runs' database: a SQLite path or a postgresql:// URL")
    submit.add_argument("--run-id", help="the run's id (default: random)")
    submit.set_defaults(handler=_submit, error_code=2)


def _worker_command(commands: Any) -> None:
    worker = commands.add_parser("worker", help="take durable runs from the queue until stopped")
    worker.add_argument("--db", required=True, help="the runs' database: a SQLite path or a postgresql:// URL")
    worker.add_argument("--loops", action="append", required=True, metavar="MODULE",
                        help="a .py file or module that makes the durable loops, loop.durable(NAME) (repeatable)")
    worker.add_argument("--concurrency", type=_positive, default=4, help="runs at once in this worker (default 4)")
    worker.add_argument("--grace", type=_seconds, default=30.0, metavar="SECONDS",
                        help="when stopped, how long a run in a call may take to finish it before its run is "
                             "handed back (default 30)")
    worker.add_argument("--heartbeat", type=_positive_seconds, default=HEARTBEAT, metavar="SECONDS",
                        help=f"how often this worker says it is alive, and looks for silent peers (default {HEARTBEAT})")
    worker.add_argument("--dead-after", type=_positive_seconds, default=DEAD_AFTER, metavar="SECONDS",
                        help="how long a peer may be silent before its runs are recovered here (default "
                             f"{DEAD_AFTER}; more than --heartbeat)")
    worker.set_defaults(handler=_worker)


def _inspect_command(commands: Any) -> None:
    inspect = commands.add_parser("inspect", help="write a self-contained HTML page that replays a recorded run")
    inspect.add_argument("trace", metavar="RUN.jsonl|RUN_ID")
    inspect.add_argument("-o", "--output", required=True, metavar="PAGE.html", help="where to write the page")
    inspect.add_argument("--machine", help="definition the trace ran on (default: the one it names)")
    inspect.add_argument("--db", help="RUN.jsonl is the id of a durable run in this database: its page, whole")
    inspect.add_argument("--turn", type=_positive, help="with --db, a run stored by an earlier forge: only this turn of it")
    inspect.add_argument("--against", metavar="B.jsonl",
                         help="another run of the same definition: draw both paths, mark where they diverge, "
                              "and align the timelines")
    inspect.set_defaults(handler=_inspect)


def _eval_command(commands: Any) -> None:
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
    evals.add_argument("--max-concurrency", type=_positive, default=4, metavar="N",
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


def _serve_command(commands: Any) -> None:
    serve = commands.add_parser("serve", help="serve loops as MCP tools, over stdio (default) or streamable HTTP; "
                                              "or one loop over A2A or AG-UI")
    serve.add_argument("loops", nargs="+", metavar="MODULE:LOOP",
                       help="an AgentLoop (served as the tool LOOP, taking a goal), or a tool loop.as_tool(...) made")
    serve.add_argument("--http", action="store_true", help="serve over streamable HTTP at http://HOST:PORT/mcp")
    serve.add_argument("--host", default="127.0.0.1", help="with --http, --a2a or --ag-ui (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="with --http, --a2a or --ag-ui (default 8000)")
    serve.add_argument("--name", default="forge", help="the server's name, as clients see it (default forge)")
    serve.add_argument("--a2a", action="store_true",
                       help="serve the one loop as an A2A agent at http://HOST:PORT/ instead (extra a2a)")
    serve.add_argument("--ag-ui", action="store_true",
                       help="serve the one loop as an AG-UI backend at http://HOST:PORT/ instead (extra ag-ui)")
    serve.set_defaults(handler=_serve)


def _check_command(commands: Any) -> None:
    check = commands.add_parser("check", help="prove loop definitions sound before they run")
    check.add_argument("definitions", nargs="*", metavar="DEFINITION",
                       help="files or built-in names, or loops (MODULE:LOOP or PATH.py:LOOP, checked with their own "
                            "stages, limits and tools) (default: every machines/*.toml)")
    check.add_argument("--max-steps", type=_positive, default=8, help="the loop's max_steps (default 8)")
    check.add_argument("--repeat-limit", type=_positive, default=3, help="the loop's repeat_limit (default 3)")
    check.add_argument("--stages", action="append", default=[], metavar="MODULE:NAME",
                       help="user stages the definitions name: a mapping of Stage objects (repeatable)")
    check.add_argument("--require", action="append", default=[], choices=PROPERTIES, metavar="PROPERTY",
                       help=f"a property to prove over every path (repeatable): {', '.join(PROPERTIES)}")
    check.add_argument("--tools", metavar="MODULE:NAME",
                       help="the loop's tools (an AgentLoop, a Tool or a list), for their side-effect flags")
    check.add_argument("--diagram", metavar="OUT.svg", help="draw the first counterexample in red on the definition")
    check.set_defaults(handler=_check)


def _ui_command(commands: Any) -> None:
    ui = commands.add_parser("ui", help="a local web app over the runs database: runs, live runs, answers")
    ui.add_argument("--db", help="the runs database: a SQLite path or a postgresql:// URL (default forge-runs.sqlite)")
    ui.add_argument("--port", type=_port, default=8765, help="the port (default 8765; 0: any free one)")
    ui.add_argument("--host", default="127.0.0.1", help="the address to bind (default 127.0.0.1: this machine only)")
    ui.add_argument("--read-only", action="store_true", help="serve no action at all: look, never answer")
    ui.set_defaults(handler=_ui, error_code=2)


def _tools_command(commands: Any) -> None:
    tools = commands.add_parser("tools", help="list an MCP server's tools as forge sees them",
                                usage="forge tools [--url URL] [-- COMMAND ARGS...]")
    tools.add_argument("--url", help="a streamable-HTTP MCP server's URL, instead of a command")
    tools.add_argument("command", nargs=argparse.REMAINDER, help="the stdio MCP server to start, after --")
    tools.set_defaults(handler=_tools)


COMMANDS: tuple[Callable[[Any], None], ...] = (
    _run_command,
    _demo_command,
    _examples_command,
    _diagram_command,
    _diagrams_command,
    _debug_command,
    _replay_command,
    _runs_command,
    _diff_command,
    _cover_command,
    _submit_command,
    _worker_command,
    _inspect_command,
    _eval_command,
    _serve_command,
    _check_command,
    _ui_command,
    _tools_command,
)
"""What `forge` offers, in the order `forge --help` lists it: each adds its command."""


def reference_markdown() -> str:
    """The command line's reference page (`docs/cli.md`): `forge --help` and each command's
    help, as argparse prints them at 100 columns. Regenerate the page with
    `python -c "from forge.cli import reference_markdown as r; print(r(), end='')" > docs/cli.md`;
    a test keeps it equal to this."""
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        parser = _parser()
        commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
        parts = ["# The command line\n\nEvery command, as `forge COMMAND --help` prints it.\n\n", EXITS,
                 "```text\n" + parser.format_help() + "```\n"]
        for name, sub in commands.choices.items():
            parts.append(f"\n## forge {name}\n\n```text\n{sub.format_help()}```\n")
            verbs = next((a for a in sub._actions if isinstance(a, argparse._SubParsersAction)), None)
            for verb, under in (verbs.choices.items() if verbs is not None else ()):
                parts.append(f"\n### forge {name} {verb}\n\n```text\n{under.format_help()}```\n")
        return "".join(parts).replace("usage: forge", "forge")
    finally:
        if previous is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = previous


def _installed_version() -> str:
    import forge

    return str(forge.__version__)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds, 0 or more, got {text}")
    return value


RUN_STATUSES = ("queued", "running", "waiting", "finished", "cancelled", "error")
"""What `forge runs list --status` takes: a stored run's statuses (`forge.durable.DurableResult.status`)."""

HEARTBEAT, DEAD_AFTER = 0.5, 2.0
"""`forge worker`'s beat and how long a silent peer is given: `forge.durable.worker.work`'s
defaults (here without importing DBOS, which the parser must not need; a test pins they agree)."""


def _positive_seconds(text: str) -> float:
    value = _seconds(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, got {text}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, got {value}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def one_line(message: str) -> str:
    """`message` on one line: a refusal that lists several problems keeps them all."""
    return " ".join(line.strip() for line in message.splitlines() if line.strip())


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except _USER_ERRORS as error:
        print(f"forge: error: {one_line(str(error))}", file=sys.stderr)
        return int(getattr(args, "error_code", 1))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
