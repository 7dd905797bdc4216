"""A durable agent that reads two items in one batch, run as a real process for the crash test
of calls made together: with `--crash`, the read of `slow` kills its process once the read of
`quick` (made at the same time) has returned and its outcome is in the database.

    python durable_batch.py DB CALLS RUN_ID [--crash]
        run RUN_ID (or recover it) and print how it ended as one JSON line; CALLS is the log
        of every handler call, one line each
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from forge import AgentLoop, Finish, Intent, Tool
from forge.durable import idempotency_key, shutdown


def _logged(calls: Path, text: str) -> None:
    with calls.open("a") as out:
        out.write(text + "\n")
        out.flush()
        os.fsync(out.fileno())


def _stored_rows(db: str, run_id: str) -> int:
    with sqlite3.connect(db, timeout=30) as connection:
        return int(connection.execute("SELECT count(*) FROM forge_journal WHERE run_id = ?", (run_id,)).fetchone()[0])


def make_loop(db: str, calls: Path, run_id: str, crash: bool) -> AgentLoop:
    def read(item: str) -> str:
        _logged(calls, f"read\t{item}\t{idempotency_key()}")
        if item == "slow" and crash:
            before = _stored_rows(db, run_id)
            deadline = time.monotonic() + 30  # a bound on the wait, not a speed claim
            while time.monotonic() < deadline and _stored_rows(db, run_id) == before:
                time.sleep(0.01)  # until the quick read's outcome is stored (or, before forge stored it, never)
            os.kill(os.getpid(), signal.SIGKILL)
        if item == "slow":
            return "slow text"
        return "quick text"

    def policy(goal: str, state: Any) -> Any:
        if not state.observations:
            return [Intent.call("read", item="quick"), Intent.call("read", item="slow")]
        return Finish(" + ".join(str(o.payload) for o in state.observations))

    return AgentLoop([Tool("read", {"read"}, read, required={"item"})], policy,
                     lambda o: o.tool_name == "finish")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("calls")
    parser.add_argument("run_id")
    parser.add_argument("--crash", action="store_true")
    args = parser.parse_args(argv)
    durable = make_loop(args.db, Path(args.calls), args.run_id, args.crash).durable(name="batch", db=args.db)
    durable.launch()
    result = durable.wait(durable.start("read both", run_id=args.run_id), timeout=120)
    print(json.dumps({"status": result.status, "reason": result.reason, "answer": result.answer}), flush=True)
    shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
