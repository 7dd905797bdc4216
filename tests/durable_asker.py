"""A durable agent that asks the user which item to file, run as a real process for the test
that kills it while it waits for the reply.

    python durable_asker.py DB LEDGER RUN_ID
        start RUN_ID (or recover it, if the database has it unfinished); print its status as
        a JSON line whenever it waits or finishes; while it waits, stay alive (to be killed)
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from forge import AgentLoop, Ask, Finish, Intent, LoopState, Tool


def make_loop(ledger: Path) -> AgentLoop:
    def file_item(item: str) -> str:
        with ledger.open("a") as out:
            out.write(item + "\n")
        return f"filed {item}"

    def policy(goal: str, state: LoopState) -> Intent | Finish | Ask:
        if not state.observations:
            return Ask("Which item should I file?")
        last = state.observations[-1]
        if last.tool_name == "ask_user":
            return Intent.call("file_item", item=goal).keyed(f"file-{goal}")
        return Finish(last.payload)

    return AgentLoop([Tool("file_item", {"file"}, file_item, required={"item"}, side_effect=True)], policy,
                     lambda observation: observation.tool_name == "finish")


def main(argv: list[str]) -> int:
    db, ledger, run_id = argv
    with make_loop(Path(ledger)).durable(name="asker", db=db) as durable:
        durable.start("file the item the user names", run_id)
        seen: Any = None
        while True:
            result = durable.status(run_id)
            shown = {"status": result.status, "question": result.question, "answer": result.answer}
            if shown != seen and result.status in ("waiting", "finished"):
                print(json.dumps(shown), flush=True)
                seen = shown
            if result.status == "finished":
                return 0
            time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
