"""A durable counting agent for the fork tests, run as a real process.

It counts to 20, one tool call a step, then finishes with the last count; the tool and the
policy note each call in `DB.calls` (outside the database), so a test can tell which calls
reached the world.

    python durable_counter.py run DB RUN_ID                 run RUN_ID to its end
    python durable_counter.py fork DB PARENT AT NEW [--patch JSON] [--crash-at N]
        fork PARENT at transition AT into NEW (or wait for that fork, if it exists) and
        print its trace as JSON lines; with --crash-at, SIGKILL this process when the N-th
        transition of this process starts
    python durable_counter.py worker DB                     be a forge worker for "counter"
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from durable_agent import CrashAt  # beside this file: SIGKILL as transition N begins

from forge import AgentLoop, Finish, Hooks, Intent, LoopState, Patch, tool
from forge.durable import shutdown

STEPS = 20


def make_loop(calls: Path) -> AgentLoop:
    def note(line: str) -> None:
        with calls.open("a") as out:
            out.write(line + "\n")
            out.flush()
            os.fsync(out.fileno())

    @tool
    def count(n: int) -> int:
        """Count to n."""
        note(f"tool {n}")
        return n

    def policy(goal: str, state: LoopState) -> Intent | Finish:
        note(f"policy {state.step_count + 1}")
        if state.step_count >= STEPS - 1:
            return Finish(state.observations[-1].payload)
        return Intent.call("count", n=state.step_count + 1)

    return AgentLoop([count], policy, verify=lambda o: isinstance(o.payload, Finish), max_steps=STEPS)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["run", "fork", "worker"])
    parser.add_argument("db")
    parser.add_argument("names", nargs="*")
    parser.add_argument("--patch")
    parser.add_argument("--crash-at", type=int)
    args = parser.parse_args(argv)
    loop = make_loop(Path(args.db + ".calls"))
    if args.crash_at:
        loop = loop.replace(hooks=Hooks(observers=[CrashAt(args.crash_at)]))
    durable = loop.durable(name="counter", db=args.db)
    if args.mode == "worker":
        from forge.durable.worker import work

        work(args.db, concurrency=2)
        return 0
    durable.launch()
    if args.mode == "run":
        run_id = durable.start("count to twenty", run_id=args.names[0])
    else:
        parent, at, new = args.names
        patch = Patch.from_json(json.loads(args.patch)) if args.patch else None
        run_id = durable.fork(parent, at=int(at), patch=patch, run_id=new)
    result = durable.wait(run_id, timeout=120)
    for trace in result.traces:
        for record in trace:
            print(json.dumps(record.to_json()))
    origin = result.forked_from.to_json() if result.forked_from else None
    print(json.dumps({"status": result.status, "reason": result.reason, "forked_from": origin}), flush=True)
    shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
