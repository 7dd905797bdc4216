"""A durable run that waits for an approval with a 3-second deadline (tests/definitions/
approval_deadline.toml: approval_required -timeout-> approval_expired), run as a real
process for the test that kills it while it waits.

    python durable_deadline.py DB RUN_ID
        start RUN_ID (or recover it); print a JSON line when it waits (with its deadline)
        and when it finishes (with its reason and the deadlines its wait stored)
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from dbos import DBOS

from forge import AgentLoop, Finish, Intent, LoopState, tool

DEFINITION = Path(__file__).with_name("definitions") / "approval_deadline.toml"


@tool(side_effect=True)
def publish(text: str) -> str:
    """Publish a text."""
    return f"published {text}"


def policy(goal: str, state: LoopState) -> Intent | Finish:
    return Intent.call("publish", text="news") if not state.observations else Finish("done")


def main(argv: list[str]) -> int:
    db, run_id = argv
    loop = AgentLoop([publish], policy, lambda observation: observation.tool_name == "finish",
                     definition=DEFINITION, approver=lambda request: None)
    with loop.durable(name="deadline", db=db) as durable:
        durable.start("publish the news", run_id)
        shown = None
        while True:
            result = durable.status(run_id)
            if result.status == "waiting" and shown != "waiting":
                print(json.dumps({"status": "waiting", "deadline": result.waiting.deadline}), flush=True)
                shown = "waiting"
            if result.status == "finished":
                stored = [step["output"] for step in DBOS.list_workflow_steps(run_id) if step["function_name"] ==
                          "forge_deadline"]
                print(json.dumps({"status": "finished", "reason": result.reason, "deadlines": stored,
                                  "left_the_wait_by": [r.trigger for r in result.trace
                                                       if r.source == "approval_required"]}), flush=True)
                return 0
            time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
