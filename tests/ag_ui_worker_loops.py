"""The durable loop `forge worker --loops tests/ag_ui_worker_loops.py` runs for the AG-UI
worker test: it pays once (a side effect a person approves), then answers; each payment
logged to FORGE_TEST_LEDGER, one line each."""

import os
from pathlib import Path

from forge import AgentLoop, Finish, Intent, tool

LEDGER = Path(os.environ["FORGE_TEST_LEDGER"])


@tool(side_effect=True)
def pay(to: str, amount: int) -> str:
    """Pay someone."""
    with LEDGER.open("a") as ledger:
        ledger.write(f"pay {to} {amount}\n")
    return f"paid {to} {amount}"


def paying(goal, state):
    return Intent.call("pay", to="bob", amount=20) if not state.observations else Finish(state.observations[-1].payload)


payer = AgentLoop([pay], paying, lambda observation: observation.tool_name == "finish", definition="approval",
                  approver=lambda request: None).durable(name="payer", db=os.environ["FORGE_TEST_DB"])
