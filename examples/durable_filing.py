"""A durable run you can kill: it files an entry per item into a ledger file (a side effect
outside the database), survives SIGKILL, and can wait for a person's approval of each write.

    python examples/durable_filing.py [--db PATH] [--run-id ID] [--kill-at N] [--approvals] [--approve]
                                      [--fork-from RUN --at K [--patch JSON]]

Run it (or run it again: an unfinished run with that id is recovered, not started anew);
`--kill-at N` SIGKILLs the process as transition N begins; `--approvals` runs
machines/approval.toml, so every write waits for an approval; `--approve` approves what
the run waits for until it ends; `--fork-from RUN --at K` makes the run a fork of the stored
run RUN at transition K, with `--patch` (JSON, as `forge.Patch.from_json` reads it) in place
of the outcome recorded there.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
from pathlib import Path
from typing import Any

from forge import AgentLoop, Finish, Hooks, Intent, Patch, Tool
from forge.durable import Answer, idempotency_key, shutdown
from forge.observe import LoopObserver

ITEMS = ("alpha", "beta", "gamma")


def file_entry(ledger: Path, item: str) -> str:
    """The side effect: one ledger line per call, written once per idempotency key, so a
    call made again after a crash (at-least-once) changes nothing."""
    key = idempotency_key()
    if ledger.exists() and any(line.startswith(f"{key}\t") for line in ledger.read_text().splitlines()):
        return f"filed {item}"
    with ledger.open("a") as out:
        out.write(f"{key}\t{item}\n")
    return f"filed {item}"


def planner(goal: str, state: Any) -> Intent | Finish:
    """Decides from the observations alone, as a durable run's policy must."""
    filed = {o.payload for o in state.observations if o.status == "ok"}
    for item in ITEMS:
        if f"filed {item}" not in filed:
            return Intent.call("file_entry", item=item)
    return Finish(f"filed {len(ITEMS)} items")


class KillAt(LoopObserver):
    """SIGKILL this process as transition `number` begins: a crash at a random point."""

    def __init__(self, number: int) -> None:
        self.number, self.seen = number, 0

    def transition_started(self, run: Any, state: str) -> None:
        self.seen += 1
        if self.seen == self.number:
            os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", default="forge-runs.sqlite")
    parser.add_argument("--run-id", default="filing-1")
    parser.add_argument("--kill-at", type=int)
    parser.add_argument("--approvals", action="store_true")
    parser.add_argument("--approve", action="store_true")
    parser.add_argument("--fork-from", metavar="RUN")
    parser.add_argument("--at", type=int, metavar="K")
    parser.add_argument("--patch", metavar="JSON")
    args = parser.parse_args()
    ledger = Path(args.db).with_suffix(".ledger")

    loop = AgentLoop([Tool("file_entry", {"file"}, lambda item: file_entry(ledger, item), required={"item"},
                           side_effect=True)],
                     planner, verify=lambda observation: observation.tool_name == "finish",
                     definition="approval" if args.approvals else "single_agent",
                     approver=(lambda request: None) if args.approvals else None,  # None: ask a person
                     hooks=Hooks(observers=[KillAt(args.kill_at)] if args.kill_at else []))
    durable = loop.durable(name="filing", db=args.db)
    if args.fork_from:
        patch = Patch.from_json(json.loads(args.patch)) if args.patch else None
        result = durable.wait(durable.fork(args.fork_from, at=args.at, patch=patch, run_id=args.run_id))
    else:
        result = durable.run("file every item", run_id=args.run_id)
    while args.approve and result.status == "waiting" and result.waiting is not None:
        print(f"approving {result.waiting.tool} {dict(result.waiting.arguments)}")
        result = durable.resume(args.run_id, Answer.approve(result.waiting.fingerprint))
    if result.status == "waiting" and result.waiting is not None:
        print(f"{args.run_id}: waiting in {result.waiting.state}: {result.waiting.question}")
    else:
        print(f"{args.run_id}: {result.status}, {result.summary}")
    print(f"ledger: {len(ledger.read_text().splitlines()) if ledger.exists() else 0} entries")
    shutdown()  # a run still waiting stays stored, for the next process to go on with


if __name__ == "__main__":
    main()
