"""The loops `forge worker --loops tests/durable_workers.py` runs in the worker test: the
durable agent of durable_agent.py, its ledger named by FORGE_TEST_LEDGER, and a loop held in
its second call until the test releases it (to follow a run live from another process)."""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from durable_agent import Ledger, make_loop

from forge import AgentLoop, Finish, Intent, Tool

filing = make_loop(Ledger(Path(os.environ["FORGE_TEST_LEDGER"]))).durable(name="filing", db=os.environ["FORGE_TEST_DB"])

approving = make_loop(Ledger(Path(os.environ["FORGE_TEST_LEDGER"])), definition="approval").durable(
    name="filing-approved", db=os.environ["FORGE_TEST_DB"])

paced = make_loop(Ledger(Path(os.environ["FORGE_TEST_LEDGER"])), pause=0.1).durable(
    name="filing-paced", db=os.environ["FORGE_TEST_DB"])


def hold(n: int) -> int:
    """Its second call waits until the test makes the file `FORGE_TEST_LEDGER`.release."""
    if n == 2:
        released = Path(os.environ["FORGE_TEST_LEDGER"] + ".release")
        for _ in range(1200):
            if released.exists():
                break
            time.sleep(0.05)
    return n


holding = AgentLoop([Tool("hold", {"hold"}, hold, required={"n"})],
                                lambda goal, state: Intent.call("hold", n=len(state.observations) + 1)
                                if len(state.observations) < 2 else Finish("held"),
                                lambda o: o.tool_name == "finish").durable(name="holding", db=os.environ["FORGE_TEST_DB"])


def counted_hold(n: int) -> int:
    """Logs each call (its n) to `FORGE_TEST_LEDGER`.held, then, for n == 2, waits as `hold`
    does: a call the test can stop a worker in the middle of, and count."""
    with open(os.environ["FORGE_TEST_LEDGER"] + ".held", "a") as log:
        log.write(f"{n}\n")
    return hold(n)


counting = AgentLoop([Tool("hold", {"hold"}, counted_hold, required={"n"})],
                                 lambda goal, state: Intent.call("hold", n=len(state.observations) + 1)
                                 if len(state.observations) < 3 else Finish("held"),
                                 lambda o: o.tool_name == "finish").durable(name="counting", db=os.environ["FORGE_TEST_DB"])

expiring = make_loop(Ledger(Path(os.environ["FORGE_TEST_LEDGER"])),
                     definition=str(Path(__file__).with_name("definitions") / "approval_deadline.toml")).durable(
    name="filing-expiring", db=os.environ["FORGE_TEST_DB"])
"""`filing-approved` whose approvals expire after 3 s (`approval_expired`)."""
