"""The commands over durable runs in a database: `forge runs list|show|follow|resume|cancel|fork`
(one function per verb, each with its own flags), `forge submit` and `forge worker`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from forge.cli.arguments import Parser, positive, positive_seconds, seconds
from forge.cli.exits import EXIT_CODES, exit_code
from forge.cli.references import patch_of
from forge.errors import UsageError

__all__ = ["DEAD_AFTER", "HEARTBEAT", "RUN_STATUSES", "runs_command", "submit_command", "worker_command"]


RUN_STATUSES = ("queued", "running", "waiting", "finished", "cancelled", "error")
"""What `forge runs list --status` takes: a stored run's statuses (`forge.durable.DurableResult.status`)."""


HEARTBEAT, DEAD_AFTER = 0.5, 2.0
"""`forge worker`'s beat and how long a silent peer is given: `forge.durable.worker.work`'s
defaults (here without importing DBOS, which the parser must not need; a test pins they agree)."""


def runs_command(commands: Any) -> None:
    runs = commands.add_parser("runs", help="list, show, follow, answer, cancel or fork durable runs in a database")
    verbs = runs.add_subparsers(dest="action", required=True, parser_class=Parser)

    def verb(name: str, help: str, run_id: bool = True) -> argparse.ArgumentParser:
        made: argparse.ArgumentParser = verbs.add_parser(name, help=help)
        if run_id:
            made.add_argument("run_id", metavar="RUN_ID")
        made.add_argument("--db", required=True, help="the runs' database: a SQLite path or a postgresql:// URL")
        made.set_defaults(handler=_runs)
        return made

    listing = verb("list", "the newest runs, or those in one status", run_id=False)
    listing.add_argument("--limit", type=positive, default=50, help="how many runs, newest first (default 50)")
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
    fork.add_argument("--at", type=positive, metavar="K", help="the transition to fork at")
    fork.add_argument("--patch", metavar="FILE.json", help="the outcome to put in place of the one recorded at K")
    fork.add_argument("--run-id", dest="run_id_new", metavar="NEW", help="the new run's id (default: random)")


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
    patch = patch_of(args.patch) if args.patch else None
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
    from forge.records.trace import error_text

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


def submit_command(commands: Any) -> None:
    submit = commands.add_parser("submit", help="queue a durable run for the workers")
    submit.add_argument("goal", metavar="GOAL")
    submit.add_argument("--loop", required=True, help="the durable loop's name, as the workers attach it (loop.durable(NAME))")
    submit.add_argument("--db", required=True, help="the runs' database: a SQLite path or a postgresql:// URL")
    submit.add_argument("--run-id", help="the run's id (default: random)")
    submit.set_defaults(handler=_submit, error_code=2)


def _submit(args: argparse.Namespace) -> int:
    from forge.durable.runs import StoredRuns

    with StoredRuns(args.db, create=True) as runs:
        run_id = runs.submit(args.loop, args.goal, args.run_id)
    print(run_id)
    return 0


def worker_command(commands: Any) -> None:
    worker = commands.add_parser("worker", help="take durable runs from the queue until stopped")
    worker.add_argument("--db", required=True, help="the runs' database: a SQLite path or a postgresql:// URL")
    worker.add_argument("--loops", action="append", required=True, metavar="MODULE",
                        help="a .py file or module that makes the durable loops, loop.durable(NAME) (repeatable)")
    worker.add_argument("--concurrency", type=positive, default=4, help="runs at once in this worker (default 4)")
    worker.add_argument("--grace", type=seconds, default=30.0, metavar="SECONDS",
                        help="when stopped, how long a run in a call may take to finish it before its run is "
                             "handed back (default 30)")
    worker.add_argument("--heartbeat", type=positive_seconds, default=HEARTBEAT, metavar="SECONDS",
                        help=f"how often this worker says it is alive, and looks for silent peers (default {HEARTBEAT})")
    worker.add_argument("--dead-after", type=positive_seconds, default=DEAD_AFTER, metavar="SECONDS",
                        help="how long a peer may be silent before its runs are recovered here (default "
                             f"{DEAD_AFTER}; more than --heartbeat)")
    worker.set_defaults(handler=_worker)


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
