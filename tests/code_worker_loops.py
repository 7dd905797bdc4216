"""The loop `forge worker --loops tests/code_worker_loops.py` runs in the code tool's worker
test: a policy that submits one program, which reads a note and sends it (a side effect a
person approves); each call logged to FORGE_TEST_LEDGER, one line each."""

import os
from pathlib import Path

from forge import AgentLoop, Finish, Intent, tool
from forge.code_tool import CodeTool

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
    with LEDGER.open("a") as ledger:
        ledger.write(f"send {to} {text}\n")
    return f"sent to {to}"


code = CodeTool([read_note, send], approver=lambda request: None)  # a person approves each send


def submitting(goal, state):
    return Intent.call("run_code", code=PROGRAM) if not state.observations else Finish(state.observations[-1].payload)


sender = AgentLoop([code], submitting, lambda observation: observation.tool_name == "finish",
                   definition="approval", approver=lambda request: True).durable(
    name="code-sender", db=os.environ["FORGE_TEST_DB"])

