"""The durable loop `forge worker --loops tests/mcp_worker_loops.py` runs for the MCP
elicitation worker test: it pays bob through the MCP server tests/mcp_asking_server.py,
which asks the user to confirm in the middle of the call; the server, one per worker
process, logs each call, answer and payment to FORGE_TEST_LEDGER; FORGE_TEST_MCP_PROTOCOL is
how the worker agrees the protocol with it (`MCPServer(protocol=...)`, default "auto")."""

import os
import sys
from pathlib import Path

from forge import AgentLoop, Finish, Intent
from forge.mcp import MCPServer

bank = MCPServer.stdio(sys.executable, str(Path(__file__).with_name("mcp_asking_server.py")),
                       os.environ["FORGE_TEST_LEDGER"], name="bank", timeout=60,
                       protocol=os.environ.get("FORGE_TEST_MCP_PROTOCOL", "auto")).open()


def paying(goal, state):
    return Intent.call("transfer", to="bob", amount=20) if not state.observations else \
        Finish(state.observations[-1].payload)


banker = AgentLoop(bank.tools(include=["transfer"]), paying, lambda observation: observation.tool_name == "finish"
                   ).durable(name="banker", db=os.environ["FORGE_TEST_DB"])
