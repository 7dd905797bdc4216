"""The loops `forge worker --loops tests/durable_workers.py` runs in the worker test: the
durable agent of durable_agent.py, its ledger named by FORGE_TEST_LEDGER."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from durable_agent import Ledger, make_loop

from forge.durable import DurableLoop

filing = DurableLoop(make_loop(Ledger(Path(os.environ["FORGE_TEST_LEDGER"]))), name="filing",
                     db=os.environ["FORGE_TEST_DB"])

approving = DurableLoop(make_loop(Ledger(Path(os.environ["FORGE_TEST_LEDGER"])), definition="approval"),
                        name="filing-approved", db=os.environ["FORGE_TEST_DB"])
