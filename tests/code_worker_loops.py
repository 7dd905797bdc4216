"""The loop `forge worker --loops tests/code_worker_loops.py` runs in the code tool's worker
tests: a policy that submits one program, which reads a note and sends it (a side effect a
person approves); each call logged to FORGE_TEST_LEDGER, one line each.

With FORGE_TEST_DIE_AT set, the worker dies (`os._exit`, as a SIGKILL leaves it) at one
moment of a run that waits for a person, once (a file beside the ledger says it has):
"parking" after the run said it waits and before it parks, "parked" once it has parked and
before its workflow ends. FORGE_TEST_SEND_SECONDS makes each send take that long."""

import os
import time
from pathlib import Path

from forge import AgentLoop, Finish, Intent, tool
from forge.code_tool import CodeTool
from forge.durable.database import RunsDatabase

LEDGER = Path(os.environ["FORGE_TEST_LEDGER"])
PROGRAM = 'note = read_note("todo.md")\nsend("bob", note)\n"sent: " + note'


@tool
def read_note(path: str) -> str:
    """Read a note."""
    with LEDGER.open("a") as ledger:
        ledger.write(f"read {path}\n")
    return "buy milk"


@tool(side_effect=True)
def send(to: str, text: str) -> str:
    """Send a message."""
    time.sleep(float(os.environ.get("FORGE_TEST_SEND_SECONDS", "0")))  # long enough for a second execution to come
    with LEDGER.open("a") as ledger:
        ledger.write(f"send {to} {text}\n")
    return f"sent to {to}"


code = CodeTool([read_note, send], approver=lambda request: None)  # a person approves each send


def submitting(goal, state):
    return Intent.call("run_code", code=PROGRAM) if not state.observations else Finish(state.observations[-1].payload)


sender = AgentLoop([code], submitting, lambda observation: observation.tool_name == "finish",
                   definition="approval", approver=lambda request: True).durable(
    name="code-sender", db=os.environ["FORGE_TEST_DB"])


def _dying_at(moment: str) -> None:
    died = LEDGER.with_name(LEDGER.name + ".died")
    chain = RunsDatabase.chain

    def chain_then_die(self, run_id, status, question=None, created_at=None):
        if status == "waiting" and not died.exists():
            if moment == "parked":
                chain(self, run_id, status, question, created_at)
            died.write_text(moment)
            os._exit(9)
        chain(self, run_id, status, question, created_at)

    RunsDatabase.chain = chain_then_die


if os.environ.get("FORGE_TEST_DIE_AT"):
    _dying_at(os.environ["FORGE_TEST_DIE_AT"])
