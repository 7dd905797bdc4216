"""A demo-like durable agent for the crash and worker tests, run as a real process.

It files one entry per item: lists the items, reads each (a read-only tool, flaky on its
first attempt), writes an entry per item (side-effecting: it appends to a ledger file outside
the database, once per idempotency key), then finishes; verify reads the ledger back.

    python durable_agent.py run DB LEDGER RUN_ID [--crash-at N [--in-tool]] [--async]
        run RUN_ID (or recover it, if the database has it unfinished) and print its trace
        as JSON lines; with --crash-at, SIGKILL this process when transition N starts (or,
        with --in-tool, inside the N-th write, after its ledger line and before it returns)
    python durable_agent.py worker DB LEDGER [--concurrency N]
        be a forge worker for the loop "filing"
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from forge import AgentLoop, Clocks, Finish, Hooks, Intent, Limits, Tool, TransientToolError
from forge.durable import idempotency_key, shutdown
from forge.observe import LoopObserver

ITEMS = ("alpha", "beta", "gamma")


def calls_made(ledger: Path, tool: str = "write_entry") -> Counter[str]:
    """How often the handler of `tool` was called, per idempotency key: every call, as it
    happened (the ledger.calls log keeps duplicates; the ledger itself does not)."""
    path = ledger.with_name(ledger.name + ".calls")
    lines = path.read_text().splitlines() if path.exists() else []
    return Counter(key for called, key in (line.split("\t", 1) for line in lines) if called == tool)


class Ledger:
    """Side effects land here, outside the database; a key seen before is not written twice
    (what a handler does with the idempotency key it is given). So the ledger cannot show a
    call made again: `calls_made` (every handler call, duplicates kept) is the evidence of
    exactly-once."""

    def __init__(self, path: Path, crash_in_write: int | None = None) -> None:
        self.path, self.crash_in_write, self.writes = path, crash_in_write, 0
        self.calls = path.with_name(path.name + ".calls")

    def called(self, tool: str) -> str:
        """Note a handler call (tool and key) in the calls log; return the key."""
        key = idempotency_key() or "no-key"
        with self.calls.open("a") as out:
            out.write(f"{tool}\t{key}\n")
            out.flush()
            os.fsync(out.fileno())
        return key

    def keys(self) -> set[str]:
        if not self.path.exists():
            return set()
        return {line.split("\t", 1)[0] for line in self.path.read_text().splitlines() if line}

    def write(self, item: str, text: str) -> str:
        key = self.called("write_entry")
        if key not in self.keys():
            with self.path.open("a") as out:
                out.write(f"{key}\t{item}\t{text}\n")
                out.flush()
                os.fsync(out.fileno())
        self.writes += 1
        if self.crash_in_write == self.writes:
            os.kill(os.getpid(), signal.SIGKILL)
        return f"filed {item}"


def planner(goal: str, state: Any) -> Intent | Finish:
    """Decides from the observations alone (a durable policy must)."""
    seen = [o for o in state.observations if o.status == "ok"]
    listed = next((o.payload for o in seen if o.tool_name == "list_items"), None)
    if listed is None:
        return Intent.call("list_items")
    read = {o.payload["item"]: o.payload["text"] for o in seen if o.tool_name == "read_item"}
    for item in listed:
        if item not in read:
            return Intent.call("read_item", item=item)
    filed = {o.payload for o in seen if o.tool_name == "write_entry"}
    for item in listed:
        if f"filed {item}" not in filed:
            return Intent.call("write_entry", item=item, text=read[item].upper())
    return Finish(f"filed {len(listed)} items")


def make_loop(ledger: Ledger, goal_items: tuple[str, ...] = ITEMS, ask: bool = False,
              definition: str = "single_agent", pause: float = 0.0) -> AgentLoop:
    """The agent; `pause` seconds is how long each read takes (a service's latency: what
    keeps runs in flight while a fleet test stops and kills workers)."""
    def read_item(item: str) -> dict[str, str]:
        if pause:
            time.sleep(pause)
        key = ledger.called("read_item").replace("/", "_")
        busy = ledger.path.with_name(f"{ledger.path.name}.{key}.busy")  # the service's state
        if not busy.exists():
            busy.touch()
            raise TransientToolError(f"{item}: service busy")
        return {"item": item, "text": f"text of {item}"}

    def verify(observation: Any) -> bool:
        return observation.tool_name == "finish" and {f"{i}" for i in goal_items} <= {
            line.split("\t")[1] for line in ledger.path.read_text().splitlines()} if ledger.path.exists() else False

    tools = [
        Tool("list_items", {"list"}, lambda: ledger.called("list_items") and list(goal_items)),
        Tool("read_item", {"read"}, read_item, required={"item"}),
        Tool("write_entry", {"write"}, ledger.write, required={"item", "text"}, side_effect=True,
             on_crash="ask" if ask else "retry"),
    ]
    approver = (lambda request: None) if definition != "single_agent" else None
    return AgentLoop(tools, planner, verify, max_steps=12, limits=Limits(repeat_limit=3),
                     clocks=Clocks(sleep=lambda s: None), definition=definition,
                     approver=approver)


class CrashAt(LoopObserver):
    def __init__(self, sequence: int) -> None:
        self.sequence, self.count = sequence, 0

    def transition_started(self, run: Any, state: str) -> None:
        self.count += 1
        if self.count == self.sequence:
            os.kill(os.getpid(), signal.SIGKILL)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["run", "worker"])
    parser.add_argument("db")
    parser.add_argument("ledger")
    parser.add_argument("run_id", nargs="?")
    parser.add_argument("--crash-at", type=int)
    parser.add_argument("--in-tool", action="store_true")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--ask", action="store_true", help="write_entry says on_crash='ask'")
    parser.add_argument("--answers", type=int, default=0, help="wait until the run has had this many answers")
    parser.add_argument("--approvals", action="store_true", help="run machines/approval.toml: every write waits")
    parser.add_argument("--async", dest="asynchronous", action="store_true",
                        help="run it on DBOS's async API: await durable.arun(...)")
    args = parser.parse_args(argv)
    crash_in_write = args.crash_at if args.in_tool else None
    ledger = Ledger(Path(args.ledger), crash_in_write)
    loop = make_loop(ledger, ask=args.ask, definition="approval" if args.approvals else "single_agent")
    if args.crash_at and not args.in_tool:
        loop = loop.replace(hooks=Hooks(observers=[CrashAt(args.crash_at)]))
    durable = loop.durable(name="filing", db=args.db)
    if args.mode == "worker":
        from forge.durable.worker import work

        work(args.db, concurrency=args.concurrency)
        return 0
    durable.launch()
    if args.asynchronous:
        import asyncio

        async def awaited() -> Any:
            return await durable.await_for(await durable.astart("file every item", run_id=args.run_id), timeout=120,
                                           answers=args.answers)

        result = asyncio.run(awaited())
    else:
        result = durable.wait(durable.start("file every item", run_id=args.run_id), timeout=120, answers=args.answers)
    for record in result.trace:
        print(json.dumps(record.to_json()))
    end: dict[str, Any] = {"status": result.status, "reason": result.reason}
    if result.waiting is not None:
        end["waiting"] = result.waiting.to_json()
    print(json.dumps(end), flush=True)
    shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
